/**
 * The API server and the code validate with the same rules: a table of bad inputs is refused by both
 * the zod schemas and the real kube-apiserver (with the generated CRDs), each naming the same field, and
 * good inputs by neither. Every example manifest applies, reads back with exactly the spec zod makes of
 * it (the API server's defaults are zod's defaults), and the CRDs give kubectl its status subresource,
 * printer columns, short names and `kubectl explain` text.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseAllDocuments, stringify } from 'yaml';
import { Status } from '../../crds/schemas/common.js';
import { validateDocument } from '../../standalone/manifests.js';
import { freshNamespace, kubectl } from '../helpers/kube.js';

const api = (spec: unknown, name = 'a') => ({
  apiVersion: 'gw.io/v1alpha1',
  kind: 'ApiDefinition',
  metadata: { name },
  spec,
});
const key = (spec: unknown, name = 'k') => ({
  apiVersion: 'gw.io/v1alpha1',
  kind: 'AccessKey',
  metadata: { name },
  spec,
});
const pol = (spec: unknown, name = 'p') => ({ apiVersion: 'gw.io/v1alpha1', kind: 'Policy', metadata: { name }, spec });
const client = (spec: unknown, name = 'c') => ({
  apiVersion: 'gw.io/v1alpha1',
  kind: 'OAuthClient',
  metadata: { name },
  spec,
});
const oas = (ext: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({
  openapi: '3.0.3',
  paths: {},
  'x-gw-api-gateway': { server: { listenPath: { value: '/o/' } }, ...ext },
  ...extra,
});
const stream = (output: Record<string, unknown>) => ({
  streams: {
    s: { input: { http_server: {} }, output: { http_client: { url: 'http://hooks.example.com/', ...output } } },
  },
});

const HASH = 'a'.repeat(64);
/** [case, document, what zod's message names, what the API server's message names] */
const bad: [string, Record<string, unknown>, string, string][] = [
  [
    'wrong type: rate as a string',
    api({ proxy: { listen_path: '/a/' }, global_rate_limit: { rate: 'ten', per: 1 } }),
    'spec.global_rate_limit.rate',
    'spec.global_rate_limit.rate',
  ],
  [
    'negative rate',
    api({ proxy: { listen_path: '/a/' }, global_rate_limit: { rate: -1, per: 1 } }),
    'spec.global_rate_limit.rate',
    'spec.global_rate_limit.rate',
  ],
  ['negative per', pol({ rate: 1, per: -5 }), 'spec.per', 'spec.per'],
  [
    'negative rate in an endpoint rule',
    api({
      proxy: { listen_path: '/a/' },
      extended_paths: { rate_limit: [{ path: '/x', method: 'GET', rate: -1, per: 1 }] },
    }),
    'spec.extended_paths.rate_limit.0.rate',
    'spec.extended_paths.rate_limit[0].rate',
  ],
  [
    'an endpoint path with a backreference (no linear-time match)',
    api({
      proxy: { listen_path: '/a/' },
      extended_paths: { rate_limit: [{ path: '/docs/(a+)\\1', method: 'GET', rate: 1, per: 1 }] },
    }),
    'spec.extended_paths.rate_limit.0.path',
    'spec.extended_paths.rate_limit[0].path: Invalid value: "/docs/(a+)\\\\1": must not use backreferences (\\1…\\9, \\k<name>) or lookaround assertions',
  ],
  [
    'an endpoint path with a lookahead',
    api({
      proxy: { listen_path: '/a/' },
      extended_paths: { rate_limit: [{ path: '/users/(?!admin).*', method: 'GET', rate: 1, per: 1 }] },
    }),
    'spec.extended_paths.rate_limit.0.path',
    'spec.extended_paths.rate_limit[0].path: Invalid value: "/users/(?!admin).*": must not use backreferences (\\1…\\9, \\k<name>) or lookaround assertions',
  ],
  [
    'a key allowed_urls entry with a lookbehind',
    key({ key_hash: HASH, access_rights: { a: { allowed_urls: [{ url: '(?<=x)/y', methods: ['GET'] }] } } }),
    'spec.access_rights.a.allowed_urls.0.url',
    'spec.access_rights[a].allowed_urls[0].url: Invalid value: "(?<=x)/y": must not use backreferences (\\1…\\9, \\k<name>) or lookaround assertions',
  ],
  [
    'a policy endpoint with a negative lookbehind',
    pol({
      access_rights: {
        a: { endpoints: [{ path: '(?<!a)/b', methods: [{ name: 'GET', limit: { rate: 1, per: 1 } }] }] },
      },
    }),
    'spec.access_rights.a.endpoints.0.path',
    'spec.access_rights[a].endpoints[0].path: Invalid value: "(?<!a)/b": must not use backreferences (\\1…\\9, \\k<name>) or lookaround assertions',
  ],
  [
    'a policy allowed_urls entry with a named backreference',
    pol({ access_rights: { a: { allowed_urls: [{ url: '/(?<n>a)\\k<n>', methods: ['GET'] }] } } }),
    'spec.access_rights.a.allowed_urls.0.url',
    'spec.access_rights[a].allowed_urls[0].url: Invalid value: "/(?<n>a)\\\\k<n>": must not use backreferences (\\1…\\9, \\k<name>) or lookaround assertions',
  ],
  [
    'a key with more than 100 APIs in access_rights',
    key({ key_hash: HASH, access_rights: Object.fromEntries(Array.from({ length: 101 }, (_, i) => [`a${i}`, {}])) }),
    'spec.access_rights: at most 100 APIs',
    'spec.access_rights: Too many',
  ],
  [
    'more than 64 allowed_urls for one API',
    pol({
      access_rights: {
        a: { allowed_urls: Array.from({ length: 65 }, (_, i) => ({ url: `/u${i}`, methods: ['GET'] })) },
      },
    }),
    'spec.access_rights.a.allowed_urls',
    'spec.access_rights.a.allowed_urls: Too many: 65: must have at most 64 items',
  ],
  [
    'a pattern longer than 256 characters',
    api({
      proxy: { listen_path: '/a/' },
      extended_paths: { rate_limit: [{ path: `/${'x'.repeat(256)}`, method: 'GET', rate: 1, per: 1 }] },
    }),
    'spec.extended_paths.rate_limit.0.path',
    'spec.extended_paths.rate_limit[0].path: Too long',
  ],
  [
    'unknown enum: streaming verb FETCH',
    api({ proxy: { listen_path: '/a/' }, streaming: stream({ verb: 'FETCH' }) }),
    'spec.streaming.streams.s.output.http_client.verb',
    'spec.streaming.streams.s.output.http_client.verb',
  ],
  [
    'an endpoint method that is not a word',
    api({
      proxy: { listen_path: '/a/' },
      extended_paths: { rate_limit: [{ path: '/x', method: 'GET POST', rate: 1, per: 1 }] },
    }),
    'spec.extended_paths.rate_limit.0.method',
    'spec.extended_paths.rate_limit[0].method',
  ],
  [
    'missing listen path',
    api({ global_rate_limit: { rate: 1, per: 1 } }),
    'spec.proxy.listen_path',
    'proxy.listen_path is required unless spec.oas is given',
  ],
  [
    'listen path not starting with /',
    api({ proxy: { listen_path: 'a/' } }),
    'spec.proxy.listen_path',
    'spec.proxy.listen_path',
  ],
  ['unknown field', api({ proxy: { listen_path: '/a/' }, rate_limitz: 1 }), 'rate_limitz', 'rate_limitz'],
  [
    'smoothing with a negative threshold',
    key({ key_hash: HASH, smoothing: { enabled: true, threshold: -1, step: 1 } }),
    'spec.smoothing.threshold',
    'spec.smoothing.threshold',
  ],
  [
    'a key rate without a window (per 0)',
    key({ key_hash: HASH, rate: 5, per: 0 }),
    'spec.per',
    'per must be greater than 0 when rate is greater than 0',
  ],
  ['a policy rate without per', pol({ rate: 5 }), 'spec.per', 'per must be greater than 0 when rate is greater than 0'],
  [
    'an API limit with per 0',
    api({ proxy: { listen_path: '/a/' }, global_rate_limit: { rate: 3, per: 0 } }),
    'spec.global_rate_limit.per',
    'spec.global_rate_limit: Invalid value',
  ],
  [
    'an access definition whose api_id is not its map key',
    key({ key_hash: HASH, access_rights: { a: { api_id: 'b' } } }),
    'spec.access_rights.a.api_id',
    'api_id must equal the map key',
  ],
  [
    'a per-API limit with per 0',
    key({ key_hash: HASH, access_rights: { a: { limit: { rate: 2, per: 0 } } } }),
    'spec.access_rights.a.limit.per',
    'per must be greater than 0',
  ],
  [
    'an endpoint rule with per 0',
    api({
      proxy: { listen_path: '/a/' },
      extended_paths: { rate_limit: [{ path: '/x', method: 'GET', rate: 1, per: 0 }] },
    }),
    'spec.extended_paths.rate_limit.0.per',
    'spec.extended_paths.rate_limit[0]: Invalid value',
  ],
  ['key_hash not hex', key({ key_hash: 'xyz' }), 'spec.key_hash', 'spec.key_hash'],
  [
    'neither secretRef nor key_hash',
    key({ rate: 1, per: 1 }),
    'exactly one of secretRef and key_hash',
    'exactly one of secretRef and key_hash',
  ],
  [
    'both secretRef and key_hash',
    key({ key_hash: HASH, secretRef: { name: 's' } }),
    'exactly one of secretRef and key_hash',
    'exactly one of secretRef and key_hash',
  ],
  [
    'OAS per not a duration',
    api({ oas: oas({ upstream: { rateLimit: { enabled: true, rate: 1, per: 'ten' } } }) }),
    'spec.oas.x-gw-api-gateway.upstream.rateLimit.per',
    'spec.oas.x-gw-api-gateway.upstream.rateLimit.per',
  ],
  [
    'OAS limit with a rate and per 0s',
    api({ oas: oas({ upstream: { rateLimit: { enabled: true, rate: 1, per: '0s' } } }) }),
    'spec.oas.x-gw-api-gateway.upstream.rateLimit.per',
    'per must be longer than 0s when rate is greater than 0',
  ],
  ['OAS version 3.1', api({ oas: { ...oas({}), openapi: '3.1.0' } }), 'spec.oas.openapi', 'spec.oas.openapi'],
  [
    'OAS without a listen path',
    api({ oas: { openapi: '3.0.3', paths: {}, 'x-gw-api-gateway': { server: {} } } }),
    'spec.oas.x-gw-api-gateway.server.listenPath',
    'spec.oas.x-gw-api-gateway.server.listenPath',
  ],
  [
    'OAS x-gw-streaming with a negative count',
    api({ oas: oas({}, { 'x-gw-streaming': { rate_limit_resources: [{ label: 'x', local: { count: -1 } }] } }) }),
    'spec.oas.x-gw-streaming.rate_limit_resources.0.local.count',
    'spec.oas.x-gw-streaming.rate_limit_resources[0].local.count',
  ],
  [
    'a stream window of 0s',
    api({
      proxy: { listen_path: '/a/' },
      streaming: { rate_limit_resources: [{ label: 'x', local: { count: 2, interval: '0s' } }] },
    }),
    'spec.streaming.rate_limit_resources.0.local.interval: must be a duration from 1ms to 8784h',
    'spec.streaming.rate_limit_resources[0].local.interval: Invalid value: "0s": must be a duration from 1ms to 8784h',
  ],
  [
    'OAS x-gw-streaming window of 0ms',
    api({ oas: oas({}, { 'x-gw-streaming': { rate_limit_resources: [{ label: 'x', local: { interval: '0ms' } }] } }) }),
    'spec.oas.x-gw-streaming.rate_limit_resources.0.local.interval',
    'spec.oas.x-gw-streaming.rate_limit_resources[0].local.interval',
  ],
  [
    'a stream output timeout of 600h',
    api({ proxy: { listen_path: '/a/' }, streaming: stream({ timeout: '600h' }) }),
    'spec.streaming.streams.s.output.http_client.timeout: must be a duration from 1ms to 24h',
    'spec.streaming.streams[s].output.http_client.timeout: Invalid value: "600h"',
  ],
  [
    'streaming given in both forms',
    api({ oas: oas({}, { 'x-gw-streaming': {} }), streaming: {} }),
    'streaming is given twice',
    'streaming is given twice',
  ],
  [
    'throttle_retry_limit not an integer',
    key({ key_hash: HASH, throttle_retry_limit: 1.5 }),
    'spec.throttle_retry_limit',
    'spec.throttle_retry_limit',
  ],
  ['tags not an array', key({ key_hash: HASH, tags: 'a,b' }), 'spec.tags', 'spec.tags'],
  ['OAuth client without secretRef', client({ api_id: 'a', client_id: 'c' }), 'spec.secretRef', 'spec.secretRef'],
  [
    'target_url not a URL',
    api({ proxy: { listen_path: '/a/', target_url: 'not a url' } }),
    'spec.proxy.target_url',
    'spec.proxy.target_url',
  ],
  [
    'date_created not a date-time',
    key({ key_hash: HASH, date_created: 'yesterday' }),
    'spec.date_created',
    'spec.date_created',
  ],
  ['api_id with a space', api({ proxy: { listen_path: '/a/' }, api_id: 'my api' }), 'spec.api_id', 'spec.api_id'],
  ['name not a DNS-1123 name', api({ proxy: { listen_path: '/a/' } }, 'Bad_Name'), 'metadata.name', 'metadata.name'],
  [
    'auth_header_name that is no header name',
    api({ proxy: { listen_path: '/a/' }, auth: { auth_header_name: 'X Bad' } }),
    'spec.auth.auth_header_name',
    'spec.auth.auth_header_name',
  ],
  [
    'an empty policy name in apply_policies',
    key({ key_hash: HASH, apply_policies: ['gold', ''] }),
    'spec.apply_policies.1',
    'spec.apply_policies[1]',
  ],
  [
    'an OAuth client_id with a space',
    client({ api_id: 'a', client_id: 'a b', secretRef: { name: 's' } }),
    'spec.client_id: must be printable ASCII without spaces',
    'spec.client_id',
  ],
  [
    'OAS with a classic global_rate_limit (ignored, silently)',
    api({ oas: oas({}), global_rate_limit: { rate: 1, per: 60 } }),
    'spec.global_rate_limit: is a classic field that spec.oas replaces',
    'classic fields that spec.oas replaces',
  ],
  [
    'OAS with a classic proxy.listen_path',
    api({ oas: oas({}), proxy: { listen_path: '/b/' } }),
    'spec.proxy.listen_path: is a classic field that spec.oas replaces',
    'classic fields that spec.oas replaces',
  ],
  [
    'OAS with the classic strip_listen_path: false',
    api({ oas: oas({}), proxy: { target_url: 'http://up.example/', strip_listen_path: false } }),
    'spec.proxy.strip_listen_path: proxy.strip_listen_path: false is a classic field',
    'proxy.strip_listen_path: false is a classic field',
  ],
  [
    'OAS authentication on, use_keyless: true (it made the API keyless)',
    api({
      use_keyless: true,
      oas: oas({ server: { listenPath: { value: '/o/' }, authentication: { enabled: true } } }),
    }),
    'spec.use_keyless: use_keyless: true contradicts',
    'use_keyless: true contradicts',
  ],
  [
    "OAS info.id with a colon (it named another API's buckets)",
    api({ oas: oas({ info: { id: 'cat:e:GET /items' } }) }),
    'spec.oas.x-gw-api-gateway.info.id',
    'spec.oas.x-gw-api-gateway.info.id',
  ],
  [
    'OAS with classic extended_paths',
    api({ oas: oas({}), use_extended_paths: true, extended_paths: { rate_limit: [] } }),
    'spec.use_extended_paths: is a classic field',
    'classic fields that spec.oas replaces',
  ],
];
const good: [string, Record<string, unknown>][] = [
  ['classic API', api({ proxy: { listen_path: '/a/' }, global_rate_limit: { rate: 0, per: 0 } })],
  [
    'OAS API',
    api({
      oas: {
        openapi: '3.0.3',
        paths: { '/x': { get: { operationId: 'x' } } },
        'x-gw-api-gateway': {
          server: { listenPath: { value: '/o/' } },
          middleware: { operations: { x: { rateLimit: { enabled: true, rate: 1, per: '10s' } } } },
        },
      },
    }),
  ],
  [
    'OAS API with a disabled 0s limit and a 0/0s one',
    api({
      oas: oas(
        { upstream: { rateLimit: { enabled: false, rate: 5, per: '0s' } } },
        { paths: { '/x': { get: { operationId: 'x' } } } },
      ),
    }),
  ],
  [
    'OAS API with x-gw-streaming',
    api({
      oas: oas(
        {},
        {
          'x-gw-streaming': {
            rate_limit_resources: [{ label: 'x' }],
            streams: {
              s: {
                input: { http_server: {} },
                output: { http_client: { url: 'http://h.example/', rate_limit: 'x', verb: 'PUT' } },
              },
            },
          },
        },
      ),
    }),
  ],
  [
    'stream resource with a 600h window',
    api({
      proxy: { listen_path: '/a/' },
      streaming: {
        rate_limit_resources: [{ label: 'm', local: { count: 2, interval: '600h' } }],
        ...stream({ rate_limit: 'm' }),
      },
    }),
  ],
  [
    'stream resource without a label, named by rate_limit ""',
    api({
      proxy: { listen_path: '/a/' },
      streaming: { rate_limit_resources: [{ local: { count: 2 } }], ...stream({ rate_limit: '' }) },
    }),
  ],
  [
    'key with every kind of field',
    key({
      key_hash: HASH,
      rate: 1,
      per: 1,
      meta_data: { a: 1 },
      access_rights: { a: { api_id: 'a', limit: { rate: 1, per: 1 } } },
      smoothing: { enabled: true, threshold: 1, step: 1 },
    }),
  ],
  [
    'key with throttling off the Tyk way (-1), smoothing disabled by enabled alone, fractional per',
    key({
      key_hash: HASH,
      rate: 1,
      per: 0.5,
      throttle_interval: -1,
      throttle_retry_limit: -1,
      smoothing: { enabled: false },
      access_rights: { a: { limit: { rate: 0, per: 60, throttle_retry_limit: -1 } } },
    }),
  ],
  [
    'patterns that only look like backreferences or lookarounds (escaped, or inside a character class)',
    key({
      key_hash: HASH,
      access_rights: {
        a: {
          allowed_urls: ['/a\\\\1', '/c\\(?=', '/d[(?=]', '/e[(?<!]x', '/users/{id}'].map((url) => ({
            url,
            methods: ['GET'],
          })),
        },
      },
    }),
  ],
  ['policy with rate 0 and per 0 (no limit)', pol({ rate: 0, per: 0 })],
  [
    'policy with per-endpoint limits',
    pol({
      rate: 10,
      per: 1,
      access_rights: { a: { endpoints: [{ path: '/x', methods: [{ name: 'GET', limit: { rate: 1, per: 1 } }] }] } },
      meta_data: { rate_limit_pattern: '$gw_meta.org' },
    }),
  ],
  [
    'OAuth client',
    client({ api_id: 'a', client_id: 'c', secretRef: { name: 's' }, dcr_registration: { provider: 'p' } }),
  ],
  [
    'OAS API keyless by use_keyless (the document says nothing of authentication)',
    api({ use_keyless: true, oas: oas({}) }),
  ],
  [
    'OAS API whose upstream is proxy.target_url',
    api({ oas: oas({}), proxy: { target_url: 'http://up.example:8080' } }),
  ],
];

const dryRun = (ns: string, doc: unknown) =>
  kubectl(['apply', '--dry-run=server', '-n', ns, '-f', '-'], stringify(doc));

describe('zod and the real kube-apiserver agree', () => {
  let ns: string;
  beforeAll(async () => {
    ns = await freshNamespace('crd');
  });

  test.each(bad)('both refuse: %s', async (_name, doc, zodNeedle, apiNeedle) => {
    const v = validateDocument(doc);
    expect(v.ok ? 'accepted by zod' : v.message).toContain(zodNeedle);
    const r = await dryRun(ns, doc);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain(apiNeedle);
  });

  test.each(good)('both accept: %s', async (_name, doc) => {
    const v = validateDocument(doc);
    expect(v.ok ? 'ok' : v.message).toBe('ok');
    const r = await dryRun(ns, doc);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
  });

  test('every example manifest applies to the API server and reads back as zod parses it (same defaults)', async () => {
    const dir = 'examples';
    const files = readdirSync(dir).filter((f) => /\.ya?ml$/.test(f));
    expect(files.length).toBeGreaterThanOrEqual(5);
    let gwResources = 0;
    for (const file of files) {
      const docs = parseAllDocuments(readFileSync(join(dir, file), 'utf8')).map(
        (d) => d.toJS() as { kind: string; metadata: { name: string } },
      );
      const r = await kubectl(['apply', '-n', ns, '-f', join(dir, file)]);
      expect(`${file}: ${r.stderr}`).toBe(`${file}: `);
      for (const d of docs) {
        const got = await kubectl(['get', d.kind.toLowerCase(), d.metadata.name, '-n', ns, '-o', 'json']);
        expect(got.code).toBe(0);
        const back = JSON.parse(got.stdout) as {
          kind: string;
          metadata: { name: string };
          spec?: unknown;
          stringData?: unknown;
          data?: Record<string, string>;
        };
        expect(back.metadata.name).toBe(d.metadata.name);
        const v = validateDocument(d);
        if (!v.ok) throw new Error(`${file}: ${v.message}`);
        if (v.resource.kind === 'Secret') {
          for (const [k, val] of Object.entries(v.resource.stringData ?? {}))
            expect(Buffer.from(back.data?.[k] ?? '', 'base64').toString()).toBe(val);
          continue;
        }
        gwResources++;
        expect({ file, name: d.metadata.name, spec: back.spec }).toEqual({
          file,
          name: d.metadata.name,
          spec: v.resource.spec,
        });
      }
    }
    expect(gwResources).toBeGreaterThanOrEqual(8);
    // the columns (listen path, rate, per: what the controller compiled, in status) are there; no
    // controller runs here, so the values are blank (the operator suite checks them filled in)
    const list = await kubectl(['get', 'apidefinitions', '-n', ns]);
    expect(list.stdout).toMatch(/NAME\s+LISTEN\s+RATE\s+PER\s+READY/);
  });

  test('status subresource: observedGeneration and a Ready condition are written through /status and printed', async () => {
    await kubectl(
      ['apply', '-n', ns, '-f', '-'],
      stringify(api({ proxy: { listen_path: '/st/' }, global_rate_limit: { rate: 7, per: 2 } }, 'st')),
    );
    const status = {
      listenPath: '/st/',
      rate: 7,
      per: 2,
      observedGeneration: 1,
      conditions: [
        {
          type: 'Ready',
          status: 'True',
          reason: 'Compiled',
          message: 'serving',
          lastTransitionTime: '2026-01-01T00:00:00Z',
          observedGeneration: 1,
        },
      ],
    };
    expect(Status.safeParse(status).success).toBe(true);
    const p = await kubectl([
      'patch',
      'apidefinition',
      'st',
      '-n',
      ns,
      '--subresource=status',
      '--type=merge',
      '-p',
      JSON.stringify({ status }),
    ]);
    expect(p.stderr).toBe('');
    const got = JSON.parse((await kubectl(['get', 'apidef', 'st', '-n', ns, '-o', 'json'])).stdout) as {
      status: unknown;
      metadata: { generation: number };
    };
    expect(got.status).toEqual(status);
    expect(got.metadata.generation).toBe(1);
    const row = (await kubectl(['get', 'apidef', 'st', '-n', ns, '--no-headers'])).stdout;
    expect(row).toMatch(/^st\s+\/st\/\s+7\s+2\s+True\s+/);

    // status is a subresource: a write to the main resource does not change it
    await kubectl([
      'patch',
      'apidefinition',
      'st',
      '-n',
      ns,
      '--type=merge',
      '-p',
      JSON.stringify({ status: { observedGeneration: 99 } }),
    ]);
    const again = JSON.parse((await kubectl(['get', 'apidef', 'st', '-n', ns, '-o', 'json'])).stdout) as {
      status: { observedGeneration: number };
    };
    expect(again.status.observedGeneration).toBe(1);

    // an unknown condition status is refused by both
    const badStatus = { conditions: [{ type: 'Ready', status: 'Maybe' }] };
    expect(Status.safeParse(badStatus).success).toBe(false);
    const refused = await kubectl([
      'patch',
      'apidefinition',
      'st',
      '-n',
      ns,
      '--subresource=status',
      '--type=merge',
      '-p',
      JSON.stringify({ status: badStatus }),
    ]);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain('status.conditions[0].status');
  });

  test('short names and the gw category list every kind', async () => {
    await kubectl(['apply', '-n', ns, '-f', '-'], stringify(pol({ rate: 1, per: 1 }, 'short')));
    for (const short of ['apidef', 'gwapi', 'gwpol', 'gwkey', 'gwclient']) {
      const r = await kubectl(['get', short, '-n', ns]);
      expect(`${short}: ${r.stderr}`).toBe(`${short}: `);
    }
    expect((await kubectl(['get', 'gwpol', 'short', '-n', ns, '--no-headers'])).stdout).toMatch(/^short\s+1\s+1\s+/);
    const all = await kubectl(['get', 'gw', '-n', ns, '-o', 'name']);
    expect(all.stdout).toContain('policy.gw.io/short');
  });

  test('kubectl explain shows the field descriptions', async () => {
    let r = await kubectl(['explain', 'apidefinitions.spec.global_rate_limit']);
    // the API server publishes the CRD's OpenAPI shortly after it is established
    for (let i = 0; i < 50 && r.code !== 0; i++) {
      await new Promise((res) => setTimeout(res, 200));
      r = await kubectl(['explain', 'apidefinitions.spec.global_rate_limit']);
    }
    expect(r.stdout).toContain('API-level limit aggregating every source');
    expect(r.stdout).toContain('Maximum requests permitted per window.');
    const s = await kubectl(['explain', 'accesskeys.spec.key_hash']);
    expect(s.stdout).toContain('SHA-256 hex of the raw key');
    const st = await kubectl(['explain', 'apidefinitions.status.conditions']);
    expect(st.stdout).toContain('Ready tells whether the resource is in effect');
  });
});

/**
 * The API server and the code validate with the same rules: a table of bad inputs
 * (test/fixtures/bad-manifests.ts) is refused by both the zod schemas and the real kube-apiserver (with the
 * generated CRDs), each naming the same field, and good inputs by neither. Every example manifest applies, reads back with exactly the spec zod makes of
 * it (the API server's defaults are zod's defaults), and the CRDs give kubectl its status subresource,
 * printer columns, short names and `kubectl explain` text.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseAllDocuments, stringify } from 'yaml';
import { Status } from '../../crds/schemas/common.js';
import { validateDocument } from '../../standalone/manifests.js';
import { freshNamespace, kubectl } from '../helpers/kube.js';
import { api, bad, client, HASH, key, oas, pol, stream } from '../fixtures/bad-manifests.js';

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

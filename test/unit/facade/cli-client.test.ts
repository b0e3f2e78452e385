/** The CLI client's pure parts (exit-code table, connection settings, bodies, proxy requests) and liveQuota. */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readBody } from '../../../cli/client/body.js';
import { resolveConnection } from '../../../cli/client/connection.js';
import { ClientError, Exit, exitForStatus } from '../../../cli/client/exit-codes.js';
import { oneLine, seg } from '../../../cli/client/http.js';
import { buildProxyRequest } from '../../../cli/client/proxy.js';
import { generateKey } from '../../../cli/client/keys.js';
import { liveQuota } from '../../../facade/live-quota.js';
import { ManualClock } from '../../../lib/clock.js';
import { sha256hex } from '../../../lib/hash.js';
import { GatewayOptions } from '../../../lib/options.js';
import { MemorySessionStore } from '../../../stores/sessions-memory.js';
import { createEngine } from '../../../sidecar/engine/engine.js';

const codeOf = (fn: () => unknown): number | undefined => {
  try {
    fn();
  } catch (e) {
    return e instanceof ClientError ? e.code : -1;
  }
  return undefined;
};

test('exit codes: one per thing a pipeline can act on, distinct', () => {
  const table: [number, boolean, number][] = [
    [200, false, Exit.OK],
    [201, false, Exit.OK],
    [400, false, Exit.REFUSED],
    [401, false, Exit.AUTH],
    [403, false, Exit.AUTH],
    [404, false, Exit.NOT_FOUND],
    [405, false, Exit.REFUSED],
    [409, false, Exit.REFUSED],
    [413, false, Exit.REFUSED],
    [415, false, Exit.REFUSED],
    [429, false, Exit.RATE_LIMITED],
    [500, false, Exit.UNAVAILABLE],
    [502, false, Exit.UNAVAILABLE],
    [503, false, Exit.UNAVAILABLE],
    [504, false, Exit.NOT_READY],
    [502, true, Exit.GATEWAY_UNAVAILABLE],
    [504, true, Exit.GATEWAY_UNAVAILABLE],
    [404, true, Exit.NOT_FOUND],
    [302, false, Exit.UNAVAILABLE],
  ];
  for (const [status, proxy, code] of table)
    expect([status, proxy, exitForStatus(status, proxy)]).toEqual([status, proxy, code]);
  const values = Object.values(Exit);
  expect(new Set(values).size).toBe(values.length);
  expect(values).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
});

test('connection: defaults, base path kept, trailing slash dropped; bad URL or timeout → usage', () => {
  expect(resolveConnection({})).toMatchObject({ origin: 'http://127.0.0.1:8081', basePath: '', timeoutMs: 60_000 });
  expect(resolveConnection({ url: 'https://gw.example/mgmt/', timeout: '2.5' })).toMatchObject({
    origin: 'https://gw.example',
    basePath: '/mgmt',
    base: 'https://gw.example/mgmt',
    timeoutMs: 2500,
  });
  expect(resolveConnection({ token: '', secret: '' })).toMatchObject({ token: undefined, secret: undefined });
  for (const url of ['ftp://x', 'not a url', 'http://u:p@x', 'http://x/?a=1'])
    expect(codeOf(() => resolveConnection({ url }))).toBe(Exit.USAGE);
  for (const timeout of ['0', '-1', 'soon', '99999'])
    expect(codeOf(() => resolveConnection({ timeout }))).toBe(Exit.USAGE);
});

test('bodies: --body JSON object, --body-file, fallback; anything else → usage', () => {
  const dir = mkdtempSync(join(tmpdir(), 'gw-cli-unit-'));
  try {
    const file = join(dir, 'b.json');
    writeFileSync(file, '{"rate": 1}');
    expect(readBody({ body: '{"a":1}' }, undefined)).toEqual({ a: 1 });
    expect(readBody({ bodyFile: file }, undefined)).toEqual({ rate: 1 });
    expect(readBody({}, { d: 1 })).toEqual({ d: 1 });
    expect(readBody({}, undefined)).toBeUndefined();
    for (const body of ['[1]', 'null', '"s"', '5', '{'])
      expect(codeOf(() => readBody({ body }, undefined))).toBe(Exit.USAGE);
    expect(codeOf(() => readBody({ bodyFile: join(dir, 'missing.json') }, undefined))).toBe(Exit.USAGE);
    expect(codeOf(() => readBody({ body: '{}', bodyFile: file }, undefined))).toBe(Exit.USAGE);
    expect(codeOf(() => readBody({ body: JSON.stringify({ a: 'x'.repeat(1024 * 1024) }) }, undefined))).toBe(
      Exit.USAGE,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('proxy request: positional METHOD URL, one argument = URL with GET (or the method when a bare word), headers and data merged over --body', () => {
  const base = { header: [] as string[] };
  expect(buildProxyRequest('http://g/x', undefined, base)).toEqual({ method: 'GET', url: 'http://g/x' });
  expect(buildProxyRequest('post', 'http://g/x', { ...base, data: '{"a":1}' })).toEqual({
    method: 'post',
    url: 'http://g/x',
    body: { a: 1 },
  });
  expect(buildProxyRequest('PUT', 'http://g/x', { ...base, data: 'plain text' })).toMatchObject({ body: 'plain text' });
  const merged = buildProxyRequest(undefined, undefined, {
    header: ['Authorization: k1', 'X-A:  spaced : colon '],
    body: JSON.stringify({ method: 'DELETE', url: 'http://g/y', headers: { 'x-keep': '1' } }),
  });
  expect(merged).toEqual({
    method: 'DELETE',
    url: 'http://g/y',
    headers: { 'x-keep': '1', Authorization: 'k1', 'X-A': 'spaced : colon' },
  });
  expect(buildProxyRequest('http://g/z', undefined, { header: [], body: '{"method":"HEAD"}' })).toEqual({
    method: 'HEAD',
    url: 'http://g/z',
  });
  // One bare word is the method, the URL coming from --body (it used to be taken as the URL).
  expect(buildProxyRequest('POST', undefined, { header: [], body: '{"url":"http://g/w"}' })).toEqual({
    method: 'POST',
    url: 'http://g/w',
  });
  expect(codeOf(() => buildProxyRequest('POST', undefined, base))).toBe(Exit.USAGE);
  expect(codeOf(() => buildProxyRequest(undefined, undefined, base))).toBe(Exit.USAGE);
  expect(codeOf(() => buildProxyRequest('http://g/x', undefined, { header: ['no-colon'] }))).toBe(Exit.USAGE);
});

test('path segments keep "/", "?", "#" and dots inside one segment; messages stay on one line', () => {
  expect(seg('a/b?c#d')).toBe('a%2Fb%3Fc%23d');
  expect(seg('..')).toBe('%2E%2E');
  expect(seg('k.1')).toBe('k%2E1');
  expect(oneLine('a\r\nb\tc\u0000d\u001be')).toBe('a b cde');
});

describe('liveQuota (GET /gw/keys live values, standalone and gw facade --redis)', () => {
  test('reads the quota the gateway engine counts; undefined for unknown keys and keys without a quota', async () => {
    const clock = new ManualClock(1_700_000_000_000);
    const engine = createEngine({
      options: GatewayOptions.parse({}),
      clock,
      config: () => ({ hash: '', apis: [], policies: {} }),
    });
    const sessions = new MemorySessionStore();
    const h = sha256hex('quota-key');
    const stored = { namespace: 'default', session: { quota_max: 5, quota_renewal_rate: 60 } };
    await sessions.put(h, stored);
    await sessions.put(sha256hex('no-quota'), { namespace: 'default', session: { rate: 1, per: 1 } });
    const identity = engine.identityOf(h, stored) as string;
    await engine.limiters.quota.consume(`q:${identity}`, { max: 5, renewal: 60 });
    await engine.limiters.quota.consume(`q:${identity}`, { max: 5, renewal: 60 });
    const live = liveQuota(sessions, engine);
    expect(await live(h)).toEqual({ remaining: 3, renews: 1_700_000_060 });
    expect(await live(sha256hex('nobody'))).toBeUndefined();
    expect(await live(sha256hex('no-quota'))).toBeUndefined();
  });
});

describe('gw keys create: generated keys', () => {
  test("256-bit base64url keys that never begin with '-' (an option to the next command), all distinct", () => {
    // base64url starts with '-' once in 64 draws: ~312 of these 20,000 would without the redraw
    const keys = Array.from({ length: 20_000 }, generateKey);
    expect(keys.filter((k) => k.startsWith('-'))).toEqual([]);
    expect(keys.every((k) => /^[A-Za-z0-9_-]{43}$/.test(k))).toBe(true);
    expect(new Set(keys).size).toBe(keys.length);
  });
});

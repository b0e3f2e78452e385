/**
 * What a real `gw standalone` prints about its streams (the black-box audit's findings):
 * - a 600h rate-limit window works: the third message waits, and the process prints no
 *   TimeoutOverflowWarning (Node's timers hold at most 2^31−1 ms; every output line stays JSON);
 * - a window of 0s is refused when the directory is loaded, naming the field, so the intake is not served;
 * - a delivery failure logs the output URL without its credentials: neither the userinfo password, the
 *   query value nor a header value appears anywhere in the process output.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { request } from 'undici';
import { freePort } from '../../harness/ports.js';
import { cleanup, startStandalone, tempDir, type Standalone } from '../../helpers/standalone.js';
import { receiver, sleep, until, type Receiver } from './helpers.js';

async function post(gw: Standalone, path: string, body: unknown): Promise<number> {
  const r = await request(`${gw.gateway}${path}`, {
    method: 'POST',
    body: JSON.stringify(body),
    headers: { 'content-type': 'application/json' },
  });
  await r.body.dump();
  return r.statusCode;
}

const apiDef = (name: string, streaming: string) => `apiVersion: gw.io/v1alpha1
kind: ApiDefinition
metadata: {name: ${name}}
spec:
  use_keyless: true
  proxy: {listen_path: /${name}/}
  streaming:
${streaming}`;

/** Lines of the process output that are not JSON log lines (the ready line is plain text by design). */
const nonJsonLines = (out: string) =>
  out
    .split('\n')
    .filter((l) => l.trim() !== '' && !l.startsWith('gw standalone ready:'))
    .filter((l) => {
      try {
        JSON.parse(l);
        return false;
      } catch {
        return true;
      }
    });

describe('stream output of a gw process', () => {
  const stops: Array<() => Promise<unknown>> = [];
  afterEach(async () => {
    for (const s of stops.splice(0).reverse()) await s();
  });

  async function recv(): Promise<Receiver> {
    const r = await receiver();
    stops.push(() => r.close());
    return r;
  }

  /** kill: SIGKILL at the end instead of SIGTERM (which drains a message waiting for the limiter for 10 s). */
  async function gwWith(files: Record<string, string>, o: { kill?: boolean } = {}): Promise<Standalone> {
    const dir = tempDir('gw-streams-out-');
    stops.push(async () => cleanup(dir));
    for (const [f, text] of Object.entries(files)) writeFileSync(join(dir, f), text);
    const gw = await startStandalone(dir, [], { GW_LOG_LEVEL: 'info' });
    stops.push(() =>
      o.kill
        ? new Promise((r) => {
            if (gw.proc.exitCode !== null || gw.proc.signalCode !== null) return r(null);
            gw.proc.once('exit', r);
            gw.proc.kill('SIGKILL');
          })
        : gw.stop(),
    );
    return gw;
  }

  test('local {count: 2, interval: 600h}: the third message waits; no TimeoutOverflowWarning, only JSON lines', async () => {
    const rx = await recv();
    const gw = await gwWith(
      {
        'month.yaml': apiDef(
          'month',
          `    rate_limit_resources: [{label: peer, local: {count: 2, interval: 600h}}]
    streams:
      s:
        input: {http_server: {path: /in}}
        output: {http_client: {url: '${rx.url}/x', rate_limit: peer, timeout: 24h}}
`,
        ),
      },
      { kill: true },
    );
    for (let i = 0; i < 3; i++) expect(await post(gw, '/month/in', { i })).toBe(202);
    await rx.waitFor(2);
    await sleep(500);
    expect(rx.hits.map((h) => h.body)).toEqual([{ i: 0 }, { i: 1 }]);
    expect(gw.output()).not.toContain('TimeoutOverflowWarning');
    expect(nonJsonLines(gw.output())).toEqual([]);
  });

  test('local.interval 0s is refused at load naming the field; the intake is not served', async () => {
    const rx = await recv();
    const gw = await gwWith({
      'zero.yaml': apiDef(
        'zero',
        `    rate_limit_resources: [{label: peer, local: {count: 2, interval: 0s}}]
    streams:
      s:
        input: {http_server: {path: /in}}
        output: {http_client: {url: '${rx.url}/x', rate_limit: peer}}
`,
      ),
    });
    await until(() => gw.output().includes('resources loaded'), 10_000, 'the load');
    expect(gw.output()).toContain(
      'zero.yaml (document 0): spec.streaming.rate_limit_resources.0.local.interval: must be a duration from 1ms to 8784h',
    );
    expect(gw.output()).toContain('"errors":1');
    expect(await post(gw, '/zero/in', { i: 0 })).toBe(404);
    await sleep(200);
    expect(rx.all).toEqual([]);
  });

  test('an output that cannot connect: the log line names the URL without userinfo or query values; no secret in the output', async () => {
    const closed = await freePort();
    const gw = await gwWith({
      'leak.yaml': apiDef(
        'leak',
        `    streams:
      s:
        input: {http_server: {path: /in}}
        output:
          http_client:
            url: 'http://user:URLPASS@127.0.0.1:${closed}/x?api_key=QUERYKEY&v=1'
            headers: {x-api-key: HEADERKEY}
            max_retries: 1
            backoff: {initial_interval: 10ms, max_interval: 10ms}
`,
      ),
    });
    expect(await post(gw, '/leak/in', { i: 0 })).toBe(202);
    await until(() => gw.output().includes('stream message not delivered'), 10_000, 'the delivery failure');
    const out = gw.output();
    expect(out).toContain(`POST http://***@127.0.0.1:${closed}/x?api_key=***&v=***: connect ECONNREFUSED`);
    for (const secret of ['URLPASS', 'QUERYKEY', 'HEADERKEY', Buffer.from('user:URLPASS').toString('base64')])
      expect(out).not.toContain(secret);
  });
});

/**
 * Streams inside `gw sidecar` (cluster mode, real kube-apiserver): the stream of an ApiDefinition in the
 * compiled-config ConfigMap runs in the sidecar, is stopped when the ConfigMap drops it (the path goes
 * back to the upstream), and SIGTERM drains the messages in flight before the process exits 0.
 */
import type { Server } from 'node:http';
import { request } from 'undici';
import { compileConfig } from '../../../compiler/compile-config.js';
import { ApiDefinitionResource } from '../../../crds/kinds.js';
import { startEcho } from '../../../scripts/echo-upstream.js';
import { freshNamespace } from '../../helpers/kube.js';
import { metricsText, startSidecar, writeConfigMap, type Sidecar } from '../../helpers/sidecar.js';
import { receiver, until, type Receiver } from './helpers.js';

function config(ns: string, streaming: unknown): string {
  const api = ApiDefinitionResource.parse({
    apiVersion: 'gw.io/v1alpha1',
    kind: 'ApiDefinition',
    metadata: { name: 'ev', namespace: ns },
    spec: { use_keyless: true, proxy: { listen_path: '/ev/' }, ...(streaming ? { streaming } : {}) },
  });
  return JSON.stringify(compileConfig([api], []).config);
}

async function post(url: string, body: unknown): Promise<{ status: number; text: string }> {
  const r = await request(url, {
    method: 'POST',
    body: JSON.stringify(body),
    headers: { 'content-type': 'application/json' },
  });
  return { status: r.statusCode, text: await r.body.text() };
}

describe('streams in gw sidecar', () => {
  let ns: string;
  let echo: { server: Server; url: string };
  let rx: Receiver;
  let sc: Sidecar;
  let gw: string;

  const streaming = (url: string) => ({
    rate_limit_resources: [{ label: 'peer', local: { count: 2, interval: '1s' } }],
    streams: { s: { input: { http_server: { path: '/in' } }, output: { http_client: { url, rate_limit: 'peer' } } } },
  });

  beforeAll(async () => {
    ns = await freshNamespace('sc-streams');
    echo = await startEcho();
    rx = await receiver();
    await writeConfigMap(ns, config(ns, streaming(`${rx.url}/hook`)));
    sc = await startSidecar({ ns, upstream: echo.url });
    gw = sc.gw;
  });
  afterAll(async () => {
    if (sc && sc.proc.exitCode === null && sc.proc.signalCode === null) sc.proc.kill('SIGKILL');
    echo?.server.close();
    await rx?.close();
  });

  test('the ConfigMap stream runs in the sidecar: 202, delivered within the local limit, metrics on /metrics', async () => {
    for (let i = 0; i < 4; i++) expect((await post(`${gw}/ev/in`, { i })).status).toBe(202);
    await rx.waitFor(4, 15_000);
    expect(rx.hits.map((h) => (h.body as { i: number }).i)).toEqual([0, 1, 2, 3]);
    expect(rx.hits[2]!.t - rx.hits[0]!.t).toBeGreaterThanOrEqual(1000); // 2 per 1 s
    const m = await metricsText(sc);
    expect(m).toContain('gw_stream_messages_out_total{api="ev",stream="s"} 4');
  });

  test('a ConfigMap without the stream stops it: the path is proxied to the upstream again', async () => {
    await writeConfigMap(ns, config(ns, undefined));
    await until(async () => (await post(`${gw}/ev/in`, { x: 1 })).status === 200, 10_000, 'the stream to stop');
    const r = await post(`${gw}/ev/in`, { x: 2 });
    expect((JSON.parse(r.text) as { path: string }).path).toBe('/in'); // the echo upstream answered
  });

  test('SIGTERM drains accepted messages, then the sidecar exits 0', async () => {
    await writeConfigMap(ns, config(ns, streaming(`${rx.url}/drain`)));
    await until(async () => (await post(`${gw}/ev/in`, { d: 0 })).status === 202, 10_000, 'the stream to start again');
    for (let d = 1; d < 4; d++) expect((await post(`${gw}/ev/in`, { d })).status).toBe(202);
    expect(await sc.stop()).toBe(0);
    // all 4 accepted before SIGTERM were delivered (2 per 1 s: the drain really waited)
    expect(rx.hits.filter((h) => h.path === '/drain').map((h) => (h.body as { d: number }).d)).toEqual([0, 1, 2, 3]);
  }, 30_000);
});

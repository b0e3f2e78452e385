/**
 * A terminating sidecar (docs/helm.md, "Termination"): the preStop hook's GET /prestop on the metrics port
 * holds for --drain-delay while every gateway response closes its connection (`Connection: close`) and new
 * connections are still served, so keep-alive clients move to the pods that stay while the Service drops
 * this one; then SIGTERM drains and the process exits at once, with an idle keep-alive client attached.
 */
import http from 'node:http';
import { startEcho } from '../../scripts/echo-upstream.js';
import { freshNamespace } from '../helpers/kube.js';
import { configOf, startSidecar, writeConfigMap, type Sidecar } from '../helpers/sidecar.js';

function get(url: string, agent?: http.Agent): Promise<{ status: number; connection?: string }> {
  return new Promise((resolve, reject) => {
    http
      .get(url, { agent }, (res) => {
        res.resume();
        res.on('end', () => resolve({ status: res.statusCode ?? 0, connection: res.headers.connection }));
      })
      .on('error', reject);
  });
}

describe('gw sidecar on termination', () => {
  let s: Sidecar;
  let echo: Awaited<ReturnType<typeof startEcho>>;

  beforeAll(async () => {
    const ns = await freshNamespace('sidecar-term');
    echo = await startEcho();
    await writeConfigMap(ns, configOf(ns, [{ name: 'a', path: '/a/', rate: 100000, per: 1 }]));
    s = await startSidecar({ ns, upstream: echo.url, args: ['--drain-delay', '2'] });
  }, 30_000);
  afterAll(async () => {
    await s?.stop();
    echo?.server.close();
  });

  test('only GET /prestop: another path of the metrics port is 404', async () => {
    expect((await fetch(`${s.ops}/prestop2`)).status).toBe(404);
  });
  test('/prestop: responses close their connections for --drain-delay, new ones still served; then SIGTERM exits at once', async () => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    expect(await get(`${s.gw}/a/before`, agent)).toEqual({ status: 200, connection: 'keep-alive' });
    const t0 = Date.now();
    const hook = get(`${s.ops}/prestop`).then((r) => ({ ...r, ms: Date.now() - t0 }));
    await new Promise((r) => setTimeout(r, 300));
    // during the delay: served, each response closing its connection (the keep-alive one and new ones)
    for (let i = 0; i < 3; i++)
      expect(await get(`${s.gw}/a/during`, agent)).toEqual({ status: 200, connection: 'close' });
    expect(await get(`${s.gw}/a/fresh`)).toMatchObject({ status: 200, connection: 'close' });
    const answered = await hook;
    expect(answered.status).toBe(200);
    expect(answered.ms).toBeGreaterThanOrEqual(1900);
    expect(s.out()).toMatch(/preStop: closing connections after each response/);
    // an idle keep-alive client attached at SIGTERM does not hold the exit
    const idle = new http.Agent({ keepAlive: true, maxSockets: 1 });
    await get(`${s.gw}/a/idle`, idle);
    const t1 = Date.now();
    expect(await s.stop()).toBe(0);
    expect(Date.now() - t1).toBeLessThan(1500);
    agent.destroy();
    idle.destroy();
  }, 30_000);
});

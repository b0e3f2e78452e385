/**
 * Memory regression: the idle RSS of a real `gw sidecar` (cluster mode against the run's
 * kube-apiserver, Redis, one keyless API), run with the NODE_OPTIONS the webhook injects, after some
 * traffic. The bound (docs/benchmarks.md, "Idle RSS"): 80 MB, issue 4's target. The sidecar
 * measured ~150 MB while it loaded @kubernetes/client-node for its ConfigMap watch; loading it again
 * (or any dependency of that size) fails this test.
 */
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { request } from 'undici';
import { defaultInjectOptions, sidecarContainer } from '../../controller/webhook/inject.js';
import { freshNamespace } from '../helpers/kube.js';
import { configOf, startSidecar, writeConfigMap } from '../helpers/sidecar.js';
import { redisUrl } from '../helpers/redis.js';

const BOUND_MB = 80;

export function vmRssMb(pid: number): number {
  const m = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!m) throw new Error(`no VmRSS for ${pid}`);
  return Number(m[1]) / 1024;
}

/** The env the injected sidecar container gets as literal values (NODE_OPTIONS among them). */
function injectedEnv(): Record<string, string> {
  const c = sidecarContainer(defaultInjectOptions, { upstreamPort: 8080, listenPort: 15080, metricsPort: 15090, group: 'g', portName: 'http' });
  const out: Record<string, string> = {};
  for (const e of c.env as { name: string; value?: string }[]) if (e.value !== undefined) out[e.name] = e.value;
  return out;
}

describe('gw sidecar idle RSS', () => {
  test(`stays under ${BOUND_MB} MB after traffic (as injected)`, async () => {
    const ns = await freshNamespace('sidecar-rss');
    const up = createServer((_req, res) => void res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}'));
    await new Promise<void>((r) => up.listen(0, '127.0.0.1', r));
    const upstream = `http://127.0.0.1:${(up.address() as { port: number }).port}`;
    await writeConfigMap(ns, configOf(ns, [{ name: 'a', path: '/a/', rate: 1_000_000, per: 1 }]));
    const s = await startSidecar({ ns, upstream, redis: redisUrl(), group: 'rss', env: injectedEnv() });
    try {
      for (let i = 0; i < 500; i++) {
        const r = await request(`${s.gw}/a/x`);
        await r.body.dump();
        expect(r.statusCode).toBe(200);
      }
      await new Promise((r) => setTimeout(r, 3000)); // idle
      const rss = vmRssMb(s.proc.pid!);
      console.log(`gw sidecar idle RSS ${rss.toFixed(1)} MB (NODE_OPTIONS=${injectedEnv().NODE_OPTIONS ?? ''})`);
      expect(rss).toBeLessThanOrEqual(BOUND_MB);
    } finally {
      await s.stop();
      up.close();
    }
  }, 60_000);
});

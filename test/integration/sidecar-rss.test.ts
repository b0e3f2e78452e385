/**
 * Memory regression: the RSS of a real, idle `gw sidecar` (cluster mode against the run's
 * kube-apiserver, Redis, one keyless API), run with the env the webhook injects. Measured on Node 24
 * (docs/benchmarks.md, "Idle RSS" and runs H, I): ~150 MB ready while the sidecar loaded
 * @kubernetes/client-node, ~106 MB without it, ~101 MB with undici loaded from its own files, and
 * 78.7–79.1 MB ready / 98–100 MB after 500 requests with the memory-reducing GC after start-up, Node's
 * built-ins taken without ES imports and MALLOC_ARENA_MAX=2 (run I). The bounds are those values plus
 * a margin that still fails if the start-up GC (~20 MB) or client-node (~45 MB) comes back: 84 MB
 * ready, 110 MB after traffic.
 */
import { createServer } from 'node:http';
import { request } from 'undici';
import { defaultInjectOptions, sidecarContainer } from '../../webhook/inject.js';
import { cmdline, rssMb } from '../bench/proc.js';
import { freshNamespace } from '../helpers/kube.js';
import { configOf, startSidecar, writeConfigMap } from '../helpers/sidecar.js';
import { redisUrl } from '../helpers/redis.js';

const READY_BOUND_MB = 84;
const AFTER_TRAFFIC_BOUND_MB = 110;

/** The env the injected sidecar container gets as literal values (NODE_OPTIONS among them). */
function injectedEnv(): Record<string, string> {
  const c = sidecarContainer(defaultInjectOptions, {
    upstreamPort: 8080,
    listenPort: 15080,
    metricsPort: 15090,
    group: 'g',
    portName: 'http',
    config: false,
  });
  const out: Record<string, string> = {};
  for (const e of c.env as { name: string; value?: string }[]) if (e.value !== undefined) out[e.name] = e.value;
  return out;
}

describe('gw sidecar idle RSS', () => {
  test(`≤ ${READY_BOUND_MB} MB once ready, ≤ ${AFTER_TRAFFIC_BOUND_MB} MB idle after traffic (env as injected)`, async () => {
    const ns = await freshNamespace('sidecar-rss');
    const up = createServer(
      (_req, res) => void res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}'),
    );
    await new Promise<void>((r) => up.listen(0, '127.0.0.1', r));
    const upstream = `http://127.0.0.1:${(up.address() as { port: number }).port}`;
    await writeConfigMap(ns, configOf(ns, [{ name: 'a', path: '/a/', rate: 1_000_000, per: 1 }]));
    const s = await startSidecar({ ns, upstream, redis: redisUrl(), group: 'rss', env: injectedEnv() });
    try {
      await new Promise((r) => setTimeout(r, 2000)); // idle, config loaded
      // the process re-executed itself in place with the gateway's V8 flags (cli/gateway-v8-flags.ts)
      expect(cmdline(s.proc.pid!)).toContain('--no-memory-reducer');
      const ready = rssMb(s.proc.pid!);
      for (let i = 0; i < 500; i++) {
        const r = await request(`${s.gw}/a/x`);
        await r.body.dump();
        expect(r.statusCode).toBe(200);
      }
      await new Promise((r) => setTimeout(r, 5000)); // idle
      const after = rssMb(s.proc.pid!);
      console.log(
        `gw sidecar idle RSS: ${ready.toFixed(1)} MB ready, ${after.toFixed(1)} MB after 500 requests (NODE_OPTIONS=${injectedEnv().NODE_OPTIONS ?? ''})`,
      );
      expect(ready).toBeLessThanOrEqual(READY_BOUND_MB);
      expect(after).toBeLessThanOrEqual(AFTER_TRAFFIC_BOUND_MB);
    } finally {
      await s.stop();
      up.close();
    }
  }, 60_000);
});

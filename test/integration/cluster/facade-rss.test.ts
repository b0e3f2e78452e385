/**
 * Memory of a real `gw facade` (cluster mode against the run's kube-apiserver and Redis, started as the
 * facade-cluster suite starts it): ready, and idle again after key writes that each waited on a watch for
 * the controller. Its Kubernetes client is lib/kube (no @kubernetes/client-node: that alone adds ~40 MB),
 * and every wait's watch ends with its write, so the idle process does not grow with the writes it served.
 * Figures: docs/benchmarks.md, "Facade memory".
 */
import { jest } from '@jest/globals';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { stringify } from 'yaml';
import { rssMb } from '../../bench/proc.js';
import { freePort } from '../../harness/ports.js';
import { freshNamespace, kubeconfig } from '../../helpers/kube.js';
import { redisUrl } from '../../helpers/redis.js';
import { spawnServer, type ServerProcess } from '../../helpers/server-process.js';
import { apiDef, apply, startController, type Controller } from '../operator/helpers.js';

jest.setTimeout(60_000);

const READY_BOUND_MB = 115;
const AFTER_WRITES_BOUND_MB = 140;
const WRITES = 30;
const SECRET = 'facade-rss-secret-0123456789';

describe('gw facade memory', () => {
  let ctl: Controller | undefined;
  let facade: ServerProcess | undefined;
  let dir: string | undefined;
  afterAll(async () => {
    await facade?.stop();
    await ctl?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  test(`≤ ${READY_BOUND_MB} MB ready, ≤ ${AFTER_WRITES_BOUND_MB} MB idle after ${WRITES} key writes`, async () => {
    const ns = await freshNamespace('facade-rss');
    await apply(
      ns,
      apiDef('orders', {
        name: 'Orders',
        api_id: 'orders',
        proxy: { listen_path: '/orders/', target_url: 'http://unused.invalid' },
      }),
    );
    ctl = await startController(ns);
    dir = mkdtempSync(join(tmpdir(), 'gw-facade-rss-'));
    const config = join(dir, 'facade.yaml');
    writeFileSync(config, stringify({ secret: SECRET, access_tokens: ['facade-rss-token-0123456789'] }));
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    facade = await spawnServer(
      'facade',
      [
        'facade',
        ...['--kubeconfig', kubeconfig(), '--namespace', ns, '--redis', redisUrl()],
        ...['--config', config, '--listen', `127.0.0.1:${port}`],
      ],
      url,
      url,
    );
    await new Promise((r) => setTimeout(r, 2000)); // idle, config loaded
    const ready = rssMb(facade.proc.pid!);

    for (let i = 0; i < WRITES; i++) {
      const r = await request(`${url}/gw/keys/facade-rss-key-${i}-0123456789abcdef`, {
        method: 'POST',
        headers: { 'x-gw-authorization': SECRET, 'content-type': 'application/json' },
        body: JSON.stringify({
          rate: 10,
          per: 1,
          access_rights: { orders: { api_id: 'orders', versions: ['Default'] } },
        }),
        headersTimeout: 30_000,
      });
      const text = await r.body.text();
      expect([r.statusCode, text]).toEqual([200, expect.stringContaining('"action":"added"')]);
    }
    await new Promise((r) => setTimeout(r, 3000)); // idle
    const after = rssMb(facade.proc.pid!);
    console.log(`[facade-rss] ready ${ready.toFixed(1)} MB, idle after ${WRITES} writes ${after.toFixed(1)} MB`);
    expect(ready).toBeLessThanOrEqual(READY_BOUND_MB);
    expect(after).toBeLessThanOrEqual(AFTER_WRITES_BOUND_MB);
  });
});

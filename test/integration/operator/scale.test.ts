/**
 * Scale: N AccessKeys created while the controller runs → all N sessions in Redis; reports the time
 * and the controller's peak RSS. N = 1,000 by default (a bounded, real version for every run); the
 * full figure runs with GW_OPERATOR_SCALE_KEYS=10000 (see docs/operator.md).
 */
import { jest } from '@jest/globals';
import type { Redis } from 'ioredis';
import { loadKubeConnection } from '../../../lib/kube/connection.js';
import { sha256hex } from '../../../lib/hash.js';
import { createKubeApi, resourcePath } from '../../../lib/kube/api.js';
import { REFS } from '../../../controller/context.js';
import { kubeconfig } from '../../helpers/kube.js';
import {
  countSessions,
  createAccessKeys,
  eventually,
  startControllerStack,
  type Controller,
  type ControllerStack,
} from './helpers.js';

const N = Number(process.env.GW_OPERATOR_SCALE_KEYS ?? 1000);
/** 60 s per 10,000 keys (the bound this suite holds the controller to), never under 30 s: the API server shares 2 cores here. */
const BOUND_MS = Math.max(30_000, Math.ceil((N / 10_000) * 60_000));
const RSS_LIMIT = 300 * 1024 * 1024;

jest.setTimeout(BOUND_MS + 120_000);

describe(`gw controller at scale (${N} AccessKeys)`, () => {
  let st: ControllerStack;
  let ns: string;
  let redis: Redis;
  let ctl: Controller;

  beforeAll(async () => {
    st = await startControllerStack('scale', [], {
      env: process.env.GW_TEST_CONTROLLER_NODE_OPTIONS
        ? { NODE_OPTIONS: process.env.GW_TEST_CONTROLLER_NODE_OPTIONS }
        : {},
    });
    ({ ns, redis, ctl } = st);
  });
  afterAll(async () => {
    await st?.stop('SIGKILL');
  });

  test('every key reaches Redis within the bound; peak RSS under 300 MB', async () => {
    const api = createKubeApi(await loadKubeConnection(kubeconfig()));
    const idleRss = ctl.peakRss();
    const t0 = Date.now();
    await createAccessKeys(ns, N, (i) => sha256hex(`scale-${i}`), { rate: 10, per: 1 });
    const createdMs = Date.now() - t0;
    await eventually(async () => (await countSessions(redis)) >= N, BOUND_MS, `${N} sessions`).catch(
      async (e: Error) => {
        throw new Error(
          `${e.message} (${await countSessions(redis)} there)\n${ctl.output().split('\n').slice(-15).join('\n')}`,
        );
      },
    );
    const allInRedisMs = Date.now() - t0;
    const rss = ctl.peakRss();
    const heap = await ctl.metric('gw_controller_nodejs_heap_size_used_bytes');
    const external = await ctl.metric('gw_controller_nodejs_external_memory_bytes');
    const heapTotal = await ctl.metric('gw_controller_nodejs_heap_size_total_bytes');
    const mb = (n: number): string => `${(n / 1048576).toFixed(0)} MB`;
    console.log(
      `[operator] scale: RSS before the keys ${mb(idleRss)}; heap used ${mb(heap)} of ${mb(heapTotal)}, external ${mb(external)}`,
    );
    console.log(
      `[operator] scale: ${N} AccessKeys created in ${createdMs} ms; all ${N} sessions in Redis after ${allInRedisMs} ms; controller peak RSS ${(rss / 1024 / 1024).toFixed(0)} MB`,
    );
    expect(await countSessions(redis)).toBe(N);
    expect(allInRedisMs).toBeLessThan(BOUND_MS);
    expect(rss).toBeGreaterThan(0);
    expect(rss).toBeLessThan(RSS_LIMIT);
    // statuses follow (not part of the bound): the last key is Ready
    await eventually(
      async () => {
        const o = (await api.get(resourcePath(REFS.AccessKey, ns, `k-${N - 1}`))) as {
          status?: { conditions?: { status: string }[] };
        };
        return o.status?.conditions?.[0]?.status === 'True';
      },
      60_000,
      'last key Ready',
    );
    console.log(`[operator] scale: last key Ready after ${Date.now() - t0} ms`);
  });
});

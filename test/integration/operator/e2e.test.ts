/**
 * End to end on the real API server: `gw controller` + `gw sidecar` (both spawned from dist) sharing
 * the API server and Redis. kubectl apply of an ApiDefinition, a Policy and an AccessKey (secretRef to
 * a Secret) → the sidecar enforces the policy's limit within 2 s; a change of the policy's rate
 * reaches the sidecar within 2 s.
 */
import { jest } from '@jest/globals';
import type { Server } from 'node:http';
import { request } from 'undici';
import { redisUrl } from '../../helpers/redis.js';
import { startSidecar, type Sidecar } from '../../helpers/sidecar.js';
import {
  accessKey,
  apiDef,
  apply,
  eventually,
  policy,
  secret,
  startControllerStack,
  type ControllerStack,
} from './helpers.js';

jest.setTimeout(60_000);

const RAW_KEY = 'e2e-raw-key-0123456789abcdef';

describe('controller + sidecar end to end', () => {
  let st: ControllerStack;
  let ns: string;
  let echo: { server: Server; url: string };
  let sidecar: Sidecar;

  beforeAll(async () => {
    st = await startControllerStack('e2e');
    ({ ns, echo } = st);
    sidecar = await startSidecar({ ns, upstream: echo.url, redis: redisUrl(), waitFor: '/healthz' });
  });
  afterAll(async () => {
    await sidecar?.stop();
    await st?.stop();
  });

  const call = async (): Promise<number> => {
    const r = await request(`${sidecar.gw}/orders/1`, { headers: { authorization: RAW_KEY } });
    await r.body.dump();
    return r.statusCode;
  };

  test('kubectl apply → enforced within 2 s; a policy rate change reaches the sidecar within 2 s', async () => {
    await apply(ns, secret('e2e-key', { key: RAW_KEY }));
    const t0 = Date.now();
    await apply(
      ns,
      apiDef('orders', { api_id: 'orders', proxy: { listen_path: '/orders/', target_url: 'http://unused.invalid' } }),
      policy('tight', { rate: 3, per: 60 }),
      accessKey('caller', { secretRef: { name: 'e2e-key', key: 'key' }, apply_policies: ['tight'] }),
    );
    // the first admitted request shows config + session arrived
    await eventually(async () => (await call()) === 200, 2_000 - (Date.now() - t0), 'first 200');
    const enforcedIn = Date.now() - t0;
    const codes = [];
    for (let i = 0; i < 3; i++) codes.push(await call());
    expect(codes).toEqual([200, 200, 429]); // 3 per 60 s: the first one plus two, then refused
    console.log(`[operator] e2e: kubectl apply → sidecar enforcing in ${enforcedIn} ms`);
    expect(enforcedIn).toBeLessThan(2_000);

    const t1 = Date.now();
    await apply(ns, policy('tight', { rate: 100, per: 60 }));
    await eventually(async () => (await call()) === 200, 2_000 - (Date.now() - t1), 'admitted after the rate change');
    const changedIn = Date.now() - t1;
    console.log(`[operator] e2e: policy rate change → sidecar in ${changedIn} ms`);
    expect(changedIn).toBeLessThan(2_000);
  });
});

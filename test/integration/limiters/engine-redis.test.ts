import { ManualClock } from '../../../lib/clock.js';
import { GatewayOptions } from '../../../lib/options.js';
import { createEngine, type EngineSmoothingEvent, type GatewayEngine } from '../../../sidecar/engine/engine.js';
import type { CompiledConfig } from '../../../contract/config.js';
import type { Verdict } from '../../../sidecar/engine/types.js';
import { twoGateways, type Gateways } from './gateways.js';
import { api as mkApi, T0 } from '../../unit/engine/fixtures.js';

const cfg: CompiledConfig = { hash: 'x', apis: [], policies: {} };

describe('two engines sharing Redis', () => {
  let g: Gateways;
  let clock: ManualClock;
  let events: EngineSmoothingEvent[];
  let e1: GatewayEngine;
  let e2: GatewayEngine;
  beforeAll(async () => {
    g = await twoGateways();
    clock = new ManualClock(T0);
    events = [];
    const options = GatewayOptions.parse({ enable_kv_rolling_limiter: true });
    e1 = createEngine({
      options,
      clock,
      config: () => cfg,
      redis: g.a,
      storeDeadlineMs: 5_000,
      onSmoothingEvent: (e) => events.push(e),
    });
    e2 = createEngine({
      options,
      clock,
      config: () => cfg,
      store: g.b,
      storeDeadlineMs: 5_000,
      onSmoothingEvent: (e) => events.push(e),
    });
  });
  afterAll(() => g.close());

  test('the global key allowance is shared by every API and every gateway (15 per 60 → 15)', async () => {
    const session = { namespace: 'default', session: { rate: 15, per: 60 } };
    const apis = [mkApi('a'), mkApi('b'), mkApi('c')];
    const all = await Promise.all(
      Array.from({ length: 60 }, (_, i) =>
        (i % 2 ? e2 : e1).check({ api: apis[i % 3]!, method: 'GET', path: '/', keyHash: 'shared', session }),
      ),
    );
    expect(all.filter((v) => v.kind === 'allow')).toHaveLength(15);
  });

  test('an API-level refusal consumes no key allowance or quota, across gateways', async () => {
    const session = { namespace: 'default', session: { rate: 4, per: 60, quota_max: 50, quota_renewal_rate: 60 } };
    const limited = mkApi('lim', { apiLimit: { rate: 1, per: 60 } });
    const kinds: Verdict['kind'][] = [];
    for (let i = 0; i < 4; i++)
      kinds.push(
        (await (i % 2 ? e2 : e1).check({ api: limited, method: 'GET', path: '/', keyHash: 'k2', session })).kind,
      );
    expect(kinds).toEqual(['allow', 'api_limited', 'api_limited', 'api_limited']);
    const free = mkApi('free');
    const more: Verdict['kind'][] = [];
    for (let i = 0; i < 4; i++)
      more.push((await e2.check({ api: free, method: 'GET', path: '/', keyHash: 'k2', session })).kind);
    expect(more).toEqual(['allow', 'allow', 'allow', 'key_limited']);
    expect(await e1.readQuota('k2', session)).toMatchObject({ remaining: 46 });
  });

  test('the smoothed allowance is shared: raised through one engine, in force on the other', async () => {
    const smoothing = { enabled: true, threshold: 2, step: 4, trigger: 0.5, delay: 30 };
    const session = { namespace: 'default', session: { rate: 10, per: 60, smoothing } };
    const a = mkApi('sm');
    for (let i = 0; i < 2; i++) await e1.check({ api: a, method: 'GET', path: '/', keyHash: 'k3', session }); // the first request: R = 1 > A − step·trigger = 0 → A 2 → 6
    expect(events.map((e) => [e.event, e.api_id, e.oldAllowance, e.newAllowance])).toEqual([
      ['RateLimitSmoothingUp', 'sm', 2, 6],
    ]);
    const onE2: Verdict[] = [];
    for (let i = 0; i < 5; i++) onE2.push(await e2.check({ api: a, method: 'GET', path: '/', keyHash: 'k3', session }));
    expect(onE2.map((v) => v.kind)).toEqual(['allow', 'allow', 'allow', 'allow', 'key_limited']);
    expect(onE2[4]!.headers?.limit).toBe(6);
    expect(events).toHaveLength(1);
  });
});

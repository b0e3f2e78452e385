/**
 * The statuses of a Config reconcile, written apart from its ConfigMaps (controller/config-status.ts): only
 * for the objects they were computed for, and a newer plan stops the writing of an older one.
 */
import { ConfigStatusPlans } from '../../../controller/config-status.js';
import type { OperatorContext } from '../../../controller/context.js';
import type { KubeObject } from '../../../lib/kube/informer.js';
import { ok, type Outcome } from '../../../controller/status.js';

const apiObj = (name: string, generation = 1, uid = `uid-${name}`): KubeObject =>
  ({
    apiVersion: 'gw.io/v1alpha1',
    kind: 'ApiDefinition',
    metadata: { name, namespace: 'ns', uid, generation },
    spec: {},
  }) as unknown as KubeObject;

/** A context whose status writes wait for `release()` (or answer at once), counting them. */
function fakeCtx(cache: Map<string, KubeObject>, gate?: Promise<void>) {
  const written: string[] = [];
  let started = 0;
  const inf = {
    get: (_ns: string, name: string) => cache.get(name),
    remember: () => {},
  };
  const ctx = {
    informers: { apis: inf, policies: inf },
    status: {
      write: async (_ref: unknown, obj: KubeObject, outcome: Outcome) => {
        started++;
        await gate;
        written.push(`${obj.metadata.name}:${outcome.message}`);
        return undefined;
      },
    },
    events: { record: async () => {} },
  } as unknown as OperatorContext;
  return { ctx, written, started: () => started };
}

const plan = (objs: KubeObject[], message: string): Map<KubeObject, Outcome> =>
  new Map(objs.map((o) => [o, ok(message)]));

describe('config statuses apart from the ConfigMaps', () => {
  test('written for the objects they were computed for; a resource replaced since (new generation, new uid) or gone is skipped', async () => {
    const objs = ['a', 'b', 'c', 'd'].map((n) => apiObj(n));
    const cache = new Map(objs.map((o) => [o.metadata.name, o]));
    cache.set('b', apiObj('b', 2)); // edited since: its own Config reconcile plans it
    cache.set('c', apiObj('c', 1, 'other-uid')); // deleted and created again
    cache.delete('d');
    const f = fakeCtx(cache);
    const plans = new ConfigStatusPlans();
    plans.set('ns', plan(objs, 'm1'));
    await plans.write(f.ctx, 'ns');
    expect(f.written).toEqual(['a:m1']);
    await plans.write(f.ctx, 'ns'); // done: nothing left to write
    expect(f.written).toEqual(['a:m1']);
  });

  test('a newer plan stops the writing of an older one, which is then written in full by the next run', async () => {
    const objs = Array.from({ length: 1000 }, (_, i) => apiObj(`api-${i}`));
    const cache = new Map(objs.map((o) => [o.metadata.name, o]));
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const f = fakeCtx(cache, gate);
    const plans = new ConfigStatusPlans();
    plans.set('ns', plan(objs, 'old'));
    const first = plans.write(f.ctx, 'ns');
    await new Promise((r) => setImmediate(r));
    plans.set('ns', plan(objs, 'new')); // the next Config reconcile
    release();
    await first;
    // only the writes already in flight (16 at a time) finished; the other 984 were left to the new plan
    expect(f.written.length).toBeLessThanOrEqual(16);
    expect(f.written.every((w) => w.endsWith(':old'))).toBe(true);
    await plans.write(f.ctx, 'ns');
    expect(f.written.filter((w) => w.endsWith(':new'))).toHaveLength(1000);
  });

  test('an outcome already written for the object version in the cache is not compared again; a new version is', async () => {
    const withRv = (o: KubeObject, rv: string): KubeObject => ({
      ...o,
      metadata: { ...o.metadata, resourceVersion: rv },
    });
    const objs = Array.from({ length: 500 }, (_, i) => withRv(apiObj(`api-${i}`), `rv-${i}`));
    const cache = new Map(objs.map((o) => [o.metadata.name, o]));
    const f = fakeCtx(cache);
    const plans = new ConfigStatusPlans();
    const settled: Map<string, string>[] = [];
    plans.set('ns', plan(objs, 'm'), (v) => settled.push(v));
    await plans.write(f.ctx, 'ns');
    expect(f.started()).toBe(500);
    expect(settled[0]?.get('ApiDefinition/api-7')).toBe('rv-7');
    // the next reconcile (an edit of api-7): the 499 others compared with nothing
    const edited = withRv(apiObj('api-7'), 'rv-7b');
    cache.set('api-7', edited);
    plans.set(
      'ns',
      plan(
        objs.map((o) => (o.metadata.name === 'api-7' ? edited : o)),
        'm',
      ),
      (v) => settled.push(v),
    );
    await plans.write(f.ctx, 'ns');
    expect(f.started()).toBe(501);
    expect(settled[1]?.size).toBe(500);
    // a changed outcome for the same version is written
    plans.set('ns', new Map([[objs[3]!, ok('another message')]]));
    await plans.write(f.ctx, 'ns');
    expect(f.started()).toBe(502);
  });
});

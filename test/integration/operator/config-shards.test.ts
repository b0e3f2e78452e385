/**
 * The sharded compiled config on the real API server, served by a real `gw sidecar`:
 *   - small shards (--config-shard-bytes): the index in gw-config lists the shards; one edit rewrites one
 *     shard (and the index) and reaches the sidecar; an API alone over the shard budget is the only one
 *     refused (Ready=False ConfigTooLarge, a log line, gw_controller_config_refused) while an edit of
 *     another API still applies; shrinking it serves it again;
 *   - at scale: GW_SCALE_APIS ApiDefinitions (default 1,000; 10,000 by hand) with 20 endpoint rules each under the
 *     default budget, compiled and served: a request to the last API is limited by its endpoint rule, and
 *     one edit rewrites one shard only.
 */
import { jest } from '@jest/globals';
import type { Server } from 'node:http';
import { request } from 'undici';
import { startEcho } from '../../../scripts/echo-upstream.js';
import { loadKubeConnection } from '../../../lib/kube/connection.js';
import { createKubeApi, resourcePath, type KubeApi } from '../../../lib/kube/api.js';
import { REFS } from '../../../controller/context.js';
import { freshNamespace, kubeconfig } from '../../helpers/kube.js';
import { redisUrl } from '../../helpers/redis.js';
import { startSidecar, type Sidecar } from '../../helpers/sidecar.js';
import { ruledApi, type RuledApi } from '../../fixtures/ruled-api.js';
import { eventually, startController, waitReady, type Controller } from './helpers.js';

/**
 * 1,000 in every make test (creating ApiDefinitions through the API server is the slow part: ~30 per second
 * on the loaded 2-core test machine); docs/contract.md#scale's 10,000 with GW_SCALE_APIS=10000 (figures in docs/operator.md).
 */
const N = Number(process.env.GW_SCALE_APIS ?? 1_000);
jest.setTimeout(60_000);

interface ConfigMapView {
  metadata: { name: string; resourceVersion: string };
  data?: Record<string, string>;
}

/** An ApiDefinition: keyless, `rules` endpoint rules GET /r<i>/items at 2 per 60 s, the last one at `lastRate`. */
const apiBody = (i: number, rules = 20, lastRate = 2): RuledApi => ruledApi(i, { rules, lastRate });

async function configMaps(api: KubeApi, ns: string): Promise<Map<string, ConfigMapView>> {
  const l = (await api.get(resourcePath(REFS.ConfigMap, ns), {
    labelSelector: 'app.kubernetes.io/managed-by=gw-controller',
  })) as { items: ConfigMapView[] };
  return new Map(l.items.map((c) => [c.metadata.name, c]));
}

const shardsOf = (cms: Map<string, ConfigMapView>): string[] => [...cms.keys()].filter((n) => n !== 'gw-config');

/** The ConfigMaps once the index lists shards holding `apis` APIs in all. */
function servedInShards(api: KubeApi, ns: string, apis: number, ms: number): Promise<Map<string, ConfigMapView>> {
  return eventually(
    async () => {
      const c = await configMaps(api, ns);
      const index = c.get('gw-config')?.data?.['shards.json'];
      if (!index) return undefined;
      const listed = (JSON.parse(index) as { shards: { name: string }[] }).shards.map((s) => s.name);
      const n = listed.reduce((t, s) => t + (c.get(s)?.data?.['config.json']?.match(/"listenPath"/g)?.length ?? 0), 0);
      return n === apis && listed.length === shardsOf(c).length ? c : undefined;
    },
    ms,
    `${apis} APIs in the shards`,
  );
}

async function codes(sidecar: Sidecar, path: string, n: number): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const r = await request(`${sidecar.gw}${path}`);
    await r.body.dump();
    out.push(r.statusCode);
  }
  return out;
}

async function createAll(api: KubeApi, ns: string, bodies: object[], parallel = 16): Promise<void> {
  const path = resourcePath(REFS.ApiDefinition, ns);
  let next = 0;
  await Promise.all(
    Array.from({ length: parallel }, async () => {
      for (let i = next++; i < bodies.length; i = next++) await api.post(path, bodies[i]);
    }),
  );
}

/** The sidecar's log says it applied a config with `apis` APIs. */
const appliedWith = (sidecar: Sidecar, apis: number): boolean =>
  sidecar
    .out()
    .split('\n')
    .some((l) => l.includes('config applied') && l.includes(`"apis":${apis},`));

/** The time of the first log line after `since` that `match` accepts. */
function logTimeAfter(out: string, since: number, match: (line: string) => boolean): number | undefined {
  for (const l of out.split('\n')) {
    const t = /"time":(\d+)/.exec(l)?.[1];
    if (t && Number(t) >= since && match(l)) return Number(t);
  }
  return undefined;
}

describe('sharded compiled config', () => {
  let echo: { server: Server; url: string };
  let api: KubeApi;

  beforeAll(async () => {
    echo = await startEcho();
    api = createKubeApi(await loadKubeConnection(kubeconfig()));
  });
  afterAll(() => {
    echo?.server.close();
  });

  describe('small shards', () => {
    let ns: string;
    let ctl: Controller;
    let sidecar: Sidecar;
    beforeAll(async () => {
      ns = await freshNamespace('shards');
      ctl = await startController(ns, ['--config-shard-bytes', '20000']);
    });
    afterAll(async () => {
      await sidecar?.stop();
      await ctl?.stop();
    });

    test('index + shards; one edit rewrites one shard and reaches the sidecar; an API too large alone is the only one refused', async () => {
      await createAll(
        api,
        ns,
        Array.from({ length: 60 }, (_, i) => apiBody(i)),
      );
      const cms = await servedInShards(api, ns, 60, 30_000);
      const shards = shardsOf(cms);
      expect(shards.length).toBeGreaterThanOrEqual(6);
      for (const s of shards) expect(Buffer.byteLength(cms.get(s)!.data!['config.json']!)).toBeLessThan(20_000);
      await waitReady(ns, 'apidefinition', 'api-59', 'True', 'Reconciled');
      await ctl.metric('gw_controller_config_shards', { namespace: ns }).then((n) => expect(n).toBe(shards.length));

      sidecar = await startSidecar({ ns, upstream: echo.url, redis: redisUrl() });
      expect(await codes(sidecar, '/api-59/r19/items', 3)).toEqual([200, 200, 429]);
      expect(await codes(sidecar, '/api-0/r0/items', 3)).toEqual([200, 200, 429]);

      expect(await codes(sidecar, '/api-7/r19/items', 3)).toEqual([200, 200, 429]);
      // one edit: api-7's last rule to 1000 per 60 s (refused calls count in the window too) → one shard rewritten (and the index), the sidecar follows
      await eventually(async () => (await ctl.metric('gw_controller_queue_depth')) === 0, 10_000, 'queue drained');
      const before = await configMaps(api, ns);
      const parsedBefore = await ctl.metric('gw_controller_config_parsed_total', { kind: 'ApiDefinition' });
      const cur = (await api.get(resourcePath(REFS.ApiDefinition, ns, 'api-7'))) as { metadata: object };
      await api.put(resourcePath(REFS.ApiDefinition, ns, 'api-7'), { ...apiBody(7, 20, 1000), metadata: cur.metadata });
      // spent under 2 per 60 s; admitted again once 1000 per 60 s is served
      await eventually(async () => (await codes(sidecar, '/api-7/r19/items', 1))[0] === 200, 30_000, 'edit served');
      await waitReady(ns, 'apidefinition', 'api-7', 'True', 'Reconciled');
      await eventually(async () => (await ctl.metric('gw_controller_queue_depth')) === 0, 10_000, 'queue drained');
      // the edit cost what changed: api-7 validated and compiled again, not the 59 others (whose objects
      // the status writes had replaced in the cache since they were last compiled)
      const parsedByEdit =
        (await ctl.metric('gw_controller_config_parsed_total', { kind: 'ApiDefinition' })) - parsedBefore;
      expect(parsedByEdit).toBeGreaterThanOrEqual(1);
      expect(parsedByEdit).toBeLessThanOrEqual(2);
      const after = await configMaps(api, ns);
      const changed = shardsOf(after).filter(
        (n) => before.get(n)?.metadata.resourceVersion !== after.get(n)!.metadata.resourceVersion,
      );
      expect(changed).toHaveLength(1);
      expect(after.get(changed[0]!)!.data!['config.json']).toContain('"api-7"');
      expect(after.get('gw-config')!.metadata.resourceVersion).not.toBe(
        before.get('gw-config')!.metadata.resourceVersion,
      );

      // an API alone over the budget: only it is refused; the others keep applying
      await api.post(resourcePath(REFS.ApiDefinition, ns), apiBody(1000, 300));
      const st = await waitReady(ns, 'apidefinition', 'api-1000', 'False', 'ConfigTooLarge');
      expect(st.message).toMatch(/over the ConfigMap shard budget/);
      expect((await codes(sidecar, '/api-1000/r0/items', 1))[0]).toBe(404);
      await eventually(async () => (await ctl.metric('gw_controller_config_refused', { namespace: ns })) === 1, 5_000);
      expect(ctl.output()).toMatch(/config refused for this resource only/);
      expect((await waitReady(ns, 'apidefinition', 'api-3', 'True', 'Reconciled')).reason).toBe('Reconciled');
      await createAll(api, ns, [apiBody(61)]);
      await eventually(async () => (await codes(sidecar, '/api-61/r0/items', 1))[0] === 200, 10_000, 'api-61 served');

      // shrunk under the budget: served
      const big = (await api.get(resourcePath(REFS.ApiDefinition, ns, 'api-1000'))) as { metadata: object };
      await api.put(resourcePath(REFS.ApiDefinition, ns, 'api-1000'), { ...apiBody(1000, 20), metadata: big.metadata });
      await waitReady(ns, 'apidefinition', 'api-1000', 'True', 'Reconciled');
      await eventually(
        async () => (await codes(sidecar, '/api-1000/r0/items', 1))[0] === 200,
        10_000,
        'api-1000 served',
      );
      await eventually(async () => (await ctl.metric('gw_controller_config_refused', { namespace: ns })) === 0, 5_000);
    });
  });

  describe(`${N} APIs × 20 endpoint rules`, () => {
    let ns: string;
    let ctl: Controller;
    let sidecar: Sidecar;
    beforeAll(async () => {
      ns = await freshNamespace('shards-scale');
      ctl = await startController(ns);
    });
    afterAll(async () => {
      await sidecar?.stop();
      await ctl?.stop('SIGKILL');
    });

    test(
      'compiled and served; the last API limited by its rule; one edit rewrites one shard',
      async () => {
        const t0 = Date.now();
        await createAll(
          api,
          ns,
          Array.from({ length: N }, (_, i) => apiBody(i)),
        );
        const createdMs = Date.now() - t0;
        const cms = await servedInShards(api, ns, N, Math.max(60_000, N * 30));
        const compiledMs = Date.now() - t0;
        const shards = shardsOf(cms);
        const bytes = shards.reduce((n, s) => n + Buffer.byteLength(cms.get(s)!.data!['config.json']!), 0);
        const t1 = Date.now();
        sidecar = await startSidecar({ ns, upstream: echo.url, redis: redisUrl() });
        await eventually(async () => appliedWith(sidecar, N), 60_000, `sidecar with ${N} APIs`);
        const sidecarMs = Date.now() - t1;
        console.log(
          `[operator] shards: ${N} APIs × 20 rules created in ${createdMs} ms, all in ${shards.length} shards (${(bytes / 1e6).toFixed(1)} MB) after ${compiledMs} ms; a new sidecar serving them in ${sidecarMs} ms`,
        );
        expect(await codes(sidecar, `/api-${N - 1}/r19/items`, 3)).toEqual([200, 200, 429]);
        expect(await codes(sidecar, `/api-${N - 1}/r3/items`, 1)).toEqual([200]);

        await eventually(async () => (await ctl.metric('gw_controller_queue_depth')) === 0, 120_000, 'queue drained');
        const before = await configMaps(api, ns);
        const parsedBefore = await ctl.metric('gw_controller_config_parsed_total', { kind: 'ApiDefinition' });
        const t2 = Date.now();
        const cur = (await api.get(resourcePath(REFS.ApiDefinition, ns, `api-${N - 1}`))) as { metadata: object };
        await api.put(resourcePath(REFS.ApiDefinition, ns, `api-${N - 1}`), {
          ...apiBody(N - 1, 20, 1000),
          metadata: cur.metadata,
        });
        await eventually(
          async () => (await codes(sidecar, `/api-${N - 1}/r19/items`, 1))[0] === 200,
          30_000,
          'edit served',
        ).catch((e: Error) => {
          const tail = (t: string): string => t.split('\n').slice(-12).join('\n');
          throw new Error(`${e.message}\ncontroller:\n${tail(ctl.output())}\nsidecar:\n${tail(sidecar.out())}`);
        });
        const editMs = Date.now() - t2;
        const timeline = [
          [
            'controller wrote the shard',
            logTimeAfter(
              ctl.output(),
              t2,
              (l) => l.includes('config map updated') && !l.includes('"configMap":"gw-config"'),
            ),
          ],
          [
            'controller wrote the index',
            logTimeAfter(
              ctl.output(),
              t2,
              (l) => l.includes('config map updated') && l.includes('"configMap":"gw-config"'),
            ),
          ],
          ['sidecar applied', logTimeAfter(sidecar.out(), t2, (l) => l.includes('config applied'))],
        ].map(([w, t]) => `${w as string} +${t === undefined ? '?' : (t as number) - t2} ms`);
        console.log(`[operator] shards: edit timeline: ${timeline.join(', ')}`);
        const after = await configMaps(api, ns);
        const changed = shardsOf(after).filter(
          (n) => before.get(n)?.metadata.resourceVersion !== after.get(n)!.metadata.resourceVersion,
        );
        console.log(
          `[operator] shards: one edit reached the sidecar in ${editMs} ms; shards rewritten: ${changed.join(', ')}`,
        );
        expect(changed).toHaveLength(1);
        expect(shardsOf(after)).toEqual(shards);
        const parsedByEdit =
          (await ctl.metric('gw_controller_config_parsed_total', { kind: 'ApiDefinition' })) - parsedBefore;
        expect(parsedByEdit).toBeLessThanOrEqual(2); // the edited API, not the namespace
        expect(editMs).toBeLessThan(15_000); // sanity bound on a loaded machine; the figure is in docs/benchmarks.md
      },
      Math.max(180_000, N * 80),
    );
  });
});

/** The api_id index a key reconcile checks its access_rights against (controller/api-index.ts). */
import { ApiIdIndex } from '../../../controller/api-index.js';
import type { KubeObject } from '../../../lib/kube/informer.js';

const api = (name: string, apiId: string | undefined, path = `/${name}/`): KubeObject =>
  ({
    apiVersion: 'gw.io/v1alpha1',
    kind: 'ApiDefinition',
    metadata: { name, namespace: 'ns' },
    spec: { ...(apiId ? { api_id: apiId } : {}), use_keyless: true, proxy: { listen_path: path } },
  }) as KubeObject;

describe('api_id index', () => {
  test('add, change, delete, conflicts counted, invalid objects left out, namespaces apart', () => {
    const ix = new ApiIdIndex();
    ix.update(api('a', 'orders'), false);
    expect(ix.has('ns', 'orders')).toBe(true);
    expect(ix.has('other', 'orders')).toBe(false);
    ix.update(api('b', 'orders', '/b/'), false); // a second claim (a conflict the compiler refuses)
    ix.update(api('a', 'billing'), false); // a's api_id changed
    expect(ix.has('ns', 'billing')).toBe(true);
    expect(ix.has('ns', 'orders')).toBe(true); // still b's
    ix.update(api('b', 'orders'), true);
    expect(ix.has('ns', 'orders')).toBe(false);
    ix.update(api('c', 'bad', 'no-leading-slash'), false);
    expect(ix.has('ns', 'bad')).toBe(false);
    ix.update(api('a', 'billing'), true);
    expect(ix.has('ns', 'billing')).toBe(false);
  });

  test('a lookup costs the same with 10,000 APIs as with 10', () => {
    const ix = new ApiIdIndex();
    for (let i = 0; i < 10_000; i++) ix.update(api(`a${i}`, `id-${i}`), false);
    const t0 = performance.now();
    let n = 0;
    for (let i = 0; i < 100_000; i++) if (ix.has('ns', `id-${i % 10_000}`)) n++;
    expect(n).toBe(100_000);
    expect(performance.now() - t0).toBeLessThan(2000); // a scan per lookup would be ~10^9 steps (minutes)
  });
});

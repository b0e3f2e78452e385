/**
 * KubeBackend against a minimal in-memory API server over real HTTP (CRUD of the gw.io custom objects
 * and Secrets, list + watch with resourceVersion and field/label selectors, and a "controller" that sets
 * status.observedGeneration after a delay).
 */
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { KubeBackend } from '../../../facade/backend-kube.js';
import { createKubeApi, KubeApiError, type KubeApi } from '../../../lib/kube/api.js';
import {
  clientResourceName,
  keyResourceName,
  NotReadyError,
  SetupError,
  QUOTA_RESET_ANNOTATION,
  FACADE_CLIENT_SECRETS,
} from '../../../facade/backend.js';
import { AccessKeyResource } from '../../../crds/kinds.js';
import { sha256hex } from '../../../lib/hash.js';

type Obj = {
  metadata: {
    name: string;
    namespace?: string;
    generation?: number;
    resourceVersion?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    finalizers?: string[];
    deletionTimestamp?: string;
  };
  status?: { observedGeneration?: number; conditions?: unknown[]; quotaReset?: string };
  [k: string]: unknown;
};

let rv = 1;
/** Every change, for watches that start from an older resourceVersion. */
const changes: { rv: number; key: string; obj: Obj; line: string }[] = [];
const watchers = new Set<{ matches: (key: string, obj: Obj) => boolean; res: ServerResponse }>();

function emit(type: 'ADDED' | 'MODIFIED' | 'DELETED', key: string, obj: Obj): void {
  const snapshot = JSON.parse(JSON.stringify(obj)) as Obj;
  const change = { rv: Number(obj.metadata.resourceVersion), key, obj: snapshot, line: '' };
  change.line = `${JSON.stringify({ type, object: snapshot })}\n`;
  changes.push(change);
  for (const w of watchers) if (w.matches(key, snapshot)) w.res.write(change.line);
}

/** The objects (key: plural/ns/name); every set or delete gets a new resourceVersion and a watch event. */
class Store extends Map<string, Obj> {
  override set(key: string, obj: Obj): this {
    const type = this.has(key) ? 'MODIFIED' : 'ADDED';
    obj.metadata.resourceVersion = String(rv++);
    super.set(key, obj);
    emit(type, key, obj);
    return this;
  }
  override delete(key: string): boolean {
    const cur = this.get(key);
    if (!cur || !super.delete(key)) return false;
    emit('DELETED', key, { ...cur, metadata: { ...cur.metadata, resourceVersion: String(rv++) } });
    return true;
  }
}
const store = new Store();
let reconcileMs = 50;
/** The Ready condition the fake controller writes with observedGeneration (none when undefined). */
let readyCondition: { type: string; status: string; reason?: string; message?: string } | undefined;
/** Whether the fake controller acts on gw.io/quota-reset (records the token in status.quotaReset). */
let resetsQuota = true;
/** How long the fake controller takes to release a finalizer after a DELETE (undefined: never). */
let finalizerMs: number | undefined = 50;
/** Delay before a POST (create) is handled: lets concurrent writers both see "missing". */
let createDelayMs = 0;
/** Status code a watch is refused with (undefined: watches are served). */
let refuseWatch: number | undefined;
const requests: string[] = [];

function startFakeApiServer(): Promise<Server> {
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => setTimeout(handle, req.method === 'POST' ? createDelayMs : 0));
    const handle = (): void => {
      requests.push(`${req.method} ${req.url}`);
      const path = new URL(req.url!, 'http://x').pathname;
      const m =
        /^\/apis\/gw\.io\/v1alpha1\/(?:namespaces\/([^/]+)\/)?(\w+)(?:\/([^/]+))?$/.exec(path) ??
        /^\/api\/v1\/(?:namespaces\/([^/]+)\/)?(secrets)(?:\/([^/]+))?$/.exec(path);
      const send = (status: number, obj: unknown): void => {
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(obj));
      };
      if (!m) return send(404, { kind: 'Status', code: 404 });
      const [, ns, plural, name] = m;
      const prefix = `${plural}/`;
      if (req.method === 'GET' && !name) {
        const q = new URL(req.url!, 'http://x').searchParams;
        // labelSelector: only the `key!=value` form KubeBackend uses; fieldSelector: only metadata.name=…
        const sel = /^([^!=]+)!=(.*)$/.exec(q.get('labelSelector') ?? '');
        const byName = /^metadata\.name=(.+)$/.exec(q.get('fieldSelector') ?? '')?.[1];
        const matches = (k: string, v: Obj): boolean =>
          k.startsWith(prefix) &&
          (!ns || k.startsWith(`${prefix}${ns}/`)) &&
          (byName === undefined || v.metadata.name === byName) &&
          (!sel || v.metadata.labels?.[sel[1]!] !== sel[2]);
        if (q.get('watch') === 'true') {
          if (refuseWatch !== undefined) return send(refuseWatch, { kind: 'Status', code: refuseWatch });
          res.writeHead(200, { 'content-type': 'application/json' });
          const since = Number(q.get('resourceVersion') || '0');
          for (const c of changes) if (c.rv > since && matches(c.key, c.obj)) res.write(c.line);
          const w = { matches, res };
          watchers.add(w);
          res.on('close', () => watchers.delete(w));
          return;
        }
        const items = [...store.entries()].filter(([k, v]) => matches(k, v)).map(([, v]) => v);
        return send(200, { metadata: { resourceVersion: String(rv - 1) }, items });
      }
      const key = `${prefix}${ns}/${name ?? (JSON.parse(body) as Obj).metadata.name}`;
      const cur = store.get(key);
      if (req.method === 'GET') return cur ? send(200, cur) : send(404, { kind: 'Status', code: 404 });
      if (req.method === 'DELETE') {
        if (cur?.metadata.finalizers?.length) {
          // like the API server: marked for deletion until the finalizers are gone
          cur.metadata.deletionTimestamp ??= new Date().toISOString();
          store.set(key, cur);
          if (finalizerMs !== undefined)
            setTimeout(() => store.get(key) === cur && store.delete(key), finalizerMs).unref();
          return send(200, cur);
        }
        store.delete(key);
        return cur ? send(200, { kind: 'Status', status: 'Success' }) : send(404, { kind: 'Status', code: 404 });
      }
      const obj = JSON.parse(body) as Obj;
      if (req.method === 'POST' && cur) return send(409, { kind: 'Status', code: 409 });
      if (req.method === 'PUT' && (!cur || cur.metadata.resourceVersion !== obj.metadata.resourceVersion))
        return send(409, { kind: 'Status', code: 409 });
      obj.metadata.generation = (cur?.metadata.generation ?? 0) + 1;
      obj.metadata.namespace = ns;
      store.set(key, obj);
      if (plural !== 'secrets') {
        const g = obj.metadata.generation;
        setTimeout(() => {
          const now = store.get(key);
          const token = now?.metadata.annotations?.[QUOTA_RESET_ANNOTATION];
          if (now && now.metadata.generation === g) {
            now.status = {
              observedGeneration: g,
              ...(readyCondition ? { conditions: [readyCondition] } : {}),
              ...(resetsQuota && token ? { quotaReset: token } : {}),
            };
            store.set(key, now);
          }
        }, reconcileMs).unref();
      }
      send(req.method === 'POST' ? 201 : 200, obj);
    };
  });
  return new Promise((r) => server.listen(0, '127.0.0.1', () => r(server)));
}

let server: Server;
let backend: KubeBackend;

function apiOf(s: Server): KubeApi {
  return createKubeApi({ server: `http://127.0.0.1:${(s.address() as AddressInfo).port}`, headers: async () => ({}) });
}

beforeAll(async () => {
  server = await startFakeApiServer();
  backend = new KubeBackend({ api: apiOf(server), readyTimeoutMs: 1000 });
  store.set('apidefinitions/team/pets', {
    apiVersion: 'gw.io/v1alpha1',
    kind: 'ApiDefinition',
    metadata: { name: 'pets', namespace: 'team' },
    spec: { api_id: 'pets-id', proxy: { listen_path: '/pets/' } },
  });
  store.set('policies/team/gold', {
    apiVersion: 'gw.io/v1alpha1',
    kind: 'Policy',
    metadata: { name: 'gold', namespace: 'team' },
    spec: { rate: 1, per: 1 },
  });
});
afterAll(async () => {
  for (const w of watchers) w.res.end();
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

test('APIs by api_id across namespaces; policies by name', async () => {
  expect(await backend.getApi(undefined, 'pets-id')).toEqual({ namespace: 'team', name: 'pets', apiId: 'pets-id' });
  expect(await backend.getApi('other', 'pets-id')).toBeUndefined();
  expect(await backend.missingApis('team', ['pets-id', 'ghost'])).toEqual(['ghost']);
  expect(await backend.missingApis('other', ['pets-id'])).toEqual(['pets-id']);
  expect(await backend.getPolicy('team', 'gold')).toEqual({ namespace: 'team', name: 'gold', active: true });
  expect(await backend.getPolicy('team', 'nope')).toBeUndefined();
});

test('keys: create waits for the controller, replace keeps the resource, annotation, delete', async () => {
  const h = sha256hex('k');
  const t0 = Date.now();
  await backend.putKey(h, {
    namespace: 'team',
    name: keyResourceName(h),
    spec: { rate: 1, per: 1 },
    suppressReset: true,
  });
  expect(Date.now() - t0).toBeGreaterThanOrEqual(40);
  const stored = AccessKeyResource.parse(store.get(`accesskeys/team/${keyResourceName(h)}`));
  expect(stored.spec).toEqual({ rate: 1, per: 1, key_hash: h });
  expect(stored.metadata.annotations).toEqual({ 'gw.io/suppress-reset': 'true' });
  expect(stored.status?.observedGeneration).toBe(1);
  await backend.putKey(h, {
    namespace: 'team',
    name: keyResourceName(h),
    spec: { rate: 2, per: 1 },
    suppressReset: false,
  });
  expect(await backend.getKey(h)).toEqual({
    namespace: 'team',
    name: keyResourceName(h),
    spec: { rate: 2, per: 1 },
    suppressReset: false,
  });
  expect(await backend.listKeys()).toEqual([h]);
  expect(await backend.deleteKey(h)).toBe(true);
  expect(await backend.deleteKey(h)).toBe(false);
});

test('a write the controller never reconciles fails after readyTimeoutMs with NotReadyError; the resource exists', async () => {
  reconcileMs = 60_000;
  const h = sha256hex('slow');
  const t0 = Date.now();
  const err = await backend
    .putKey(h, { namespace: 'team', name: keyResourceName(h), spec: {}, suppressReset: false })
    .catch((e: unknown) => e);
  expect(err).toBeInstanceOf(NotReadyError);
  expect((err as Error).message).toMatch(
    /^AccessKey team\/key-[0-9a-f]{16} was written and exists, but is not Ready after 1 s: the controller has not reconciled it yet/,
  );
  expect(Date.now() - t0).toBeGreaterThanOrEqual(900);
  expect(await backend.getKey(h)).toMatchObject({ namespace: 'team', spec: {} });
  reconcileMs = 50;
  await backend.deleteKey(h);
});

test('the wait for the controller watches the written object (one list, one watch), no polling; answered on the status event', async () => {
  reconcileMs = 400;
  const h = sha256hex('watched');
  const name = keyResourceName(h);
  requests.length = 0;
  const t0 = Date.now();
  try {
    await backend.putKey(h, { namespace: 'team', name, spec: { rate: 1, per: 1 }, suppressReset: true });
  } finally {
    reconcileMs = 50;
  }
  expect(Date.now() - t0).toBeGreaterThanOrEqual(350);
  const collection = '/apis/gw.io/v1alpha1/namespaces/team/accesskeys?';
  const byName = `fieldSelector=metadata.name%3D${name}`;
  // the write's own read of the object, then the wait: no GET of it every 25–200 ms
  expect(requests.filter((r) => r === `GET /apis/gw.io/v1alpha1/namespaces/team/accesskeys/${name}`)).toHaveLength(1);
  const narrowed = requests.filter((r) => r.startsWith(`GET ${collection}`) && r.includes(byName));
  expect(narrowed.filter((r) => !r.includes('watch=true'))).toHaveLength(1);
  expect(narrowed.filter((r) => r.includes('watch=true'))).toHaveLength(1);
  expect(await backend.deleteKey(h)).toBe(true);
});

test('a watch the API server refuses fails the write with its error (the facade answers 500), not a 504 at the timeout', async () => {
  reconcileMs = 60_000;
  refuseWatch = 403;
  const h = sha256hex('refused-watch');
  try {
    const err = await backend
      .putKey(h, { namespace: 'team', name: keyResourceName(h), spec: {}, suppressReset: true })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(KubeApiError);
    expect((err as KubeApiError).code).toBe(403);
  } finally {
    refuseWatch = undefined;
    reconcileMs = 50;
  }
  expect(await backend.deleteKey(h)).toBe(true);
});

test('Ready=False for the written generation is not ready: NotReadyError carries the controller reason', async () => {
  readyCondition = { type: 'Ready', status: 'False', reason: 'PolicyMissing', message: 'policy gold not found' };
  const h = sha256hex('refused');
  try {
    const err = await backend
      .putKey(h, { namespace: 'team', name: keyResourceName(h), spec: {}, suppressReset: false })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NotReadyError);
    expect((err as Error).message).toContain('Ready=False (PolicyMissing): policy gold not found');
  } finally {
    readyCondition = undefined;
    await backend.deleteKey(h);
  }
  // Ready=True (or no condition) with the generation observed is ready
  readyCondition = { type: 'Ready', status: 'True' };
  try {
    await backend.putKey(h, { namespace: 'team', name: keyResourceName(h), spec: {}, suppressReset: false });
  } finally {
    readyCondition = undefined;
    await backend.deleteKey(h);
  }
});

test('a write without suppressReset asks the controller for a quota reset (fresh token each time) and waits until status.quotaReset has it', async () => {
  const h = sha256hex('reset-me');
  const name = keyResourceName(h);
  await backend.putKey(h, { namespace: 'team', name, spec: { quota_max: 5 }, suppressReset: false });
  const first = store.get(`accesskeys/team/${name}`)!;
  const token1 = first.metadata.annotations?.[QUOTA_RESET_ANNOTATION];
  expect(token1).toMatch(/^[0-9a-f-]{36}$/);
  expect(first.status?.quotaReset).toBe(token1);
  // the same session again: a new token (a reset is asked for again)
  await backend.putKey(h, { namespace: 'team', name, spec: { quota_max: 5 }, suppressReset: false });
  const token2 = store.get(`accesskeys/team/${name}`)!.metadata.annotations?.[QUOTA_RESET_ANNOTATION];
  expect(token2).toMatch(/^[0-9a-f-]{36}$/);
  expect(token2).not.toBe(token1);
  // suppress_reset: no token, the suppress annotation instead
  await backend.putKey(h, { namespace: 'team', name, spec: { quota_max: 5 }, suppressReset: true });
  expect(store.get(`accesskeys/team/${name}`)!.metadata.annotations).toEqual({ 'gw.io/suppress-reset': 'true' });
  // a controller that observed the generation but did not do the reset: not ready
  resetsQuota = false;
  try {
    const err = await backend
      .putKey(h, { namespace: 'team', name, spec: { quota_max: 5 }, suppressReset: false })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NotReadyError);
    expect((err as Error).message).toContain('is not Ready after 1 s: the controller has not reset its quota yet');
  } finally {
    resetsQuota = true;
    await backend.deleteKey(h);
  }
});

test('findKey: a facade-made key is one GET by its derived name; a hand-written AccessKey with key_hash is still found by the scan of non-facade keys', async () => {
  const nsBackend = new KubeBackend({ api: apiOf(server), namespace: 'team', readyTimeoutMs: 1000 });
  const h = sha256hex('direct');
  await nsBackend.putKey(h, {
    namespace: 'team',
    name: keyResourceName(h),
    spec: { rate: 1, per: 1 },
    suppressReset: true,
  });
  requests.length = 0;
  expect(await nsBackend.getKey(h)).toMatchObject({ name: keyResourceName(h), spec: { rate: 1, per: 1 } });
  expect(requests).toEqual([`GET /apis/gw.io/v1alpha1/namespaces/team/accesskeys/${keyResourceName(h)}`]);

  const hw = sha256hex('hand-written');
  store.set('accesskeys/team/my-key', {
    apiVersion: 'gw.io/v1alpha1',
    kind: 'AccessKey',
    metadata: { name: 'my-key', namespace: 'team' },
    spec: { key_hash: hw, rate: 9, per: 1 },
  });
  requests.length = 0;
  expect(await nsBackend.getKey(hw)).toMatchObject({ name: 'my-key', spec: { rate: 9, per: 1 } });
  expect(requests).toEqual([
    `GET /apis/gw.io/v1alpha1/namespaces/team/accesskeys/${keyResourceName(hw)}`,
    'GET /apis/gw.io/v1alpha1/namespaces/team/accesskeys?labelSelector=app.kubernetes.io%2Fmanaged-by%21%3Dgw-facade',
  ]);
  // unknown hash: 404 → scan (facade-made keys excluded server-side) → not found
  expect(await nsBackend.getKey(sha256hex('nope'))).toBeUndefined();
  // writes go to the existing hand-written resource, and deletes find it
  await nsBackend.putKey(hw, { namespace: 'team', name: 'ignored', spec: { rate: 8, per: 1 }, suppressReset: true });
  expect(AccessKeyResource.parse(store.get('accesskeys/team/my-key')).spec).toEqual({ key_hash: hw, rate: 8, per: 1 });
  expect(store.has(`accesskeys/team/${keyResourceName(hw)}`)).toBe(false);
  expect(store.get('accesskeys/team/my-key')!.metadata.labels).toEqual({}); // still not facade-made: found by the scan again
  expect(await nsBackend.getKey(hw)).toMatchObject({ name: 'my-key', spec: { rate: 8, per: 1 } });
  expect(await nsBackend.deleteKey(hw)).toBe(true);
  expect(await nsBackend.deleteKey(h)).toBe(true);
  expect(store.has('accesskeys/team/my-key')).toBe(false);
});

test('terminating keys: DELETE waits for the finalizer (504-style NotReadyError when it never goes), a write waits and creates anew, GET/list hide it', async () => {
  const h = sha256hex('finalized');
  const key = `accesskeys/team/${keyResourceName(h)}`;
  const put = (rate: number) =>
    backend.putKey(h, { namespace: 'team', name: keyResourceName(h), spec: { rate, per: 1 }, suppressReset: true });
  await put(1);
  store.get(key)!.metadata.finalizers = ['gw.io/session-cleanup']; // what the controller adds
  // a replace keeps the finalizer
  await put(2);
  expect(store.get(key)!.metadata.finalizers).toEqual(['gw.io/session-cleanup']);

  finalizerMs = 300;
  let t0 = Date.now();
  expect(await backend.deleteKey(h)).toBe(true);
  expect(Date.now() - t0).toBeGreaterThanOrEqual(250);
  expect(store.has(key)).toBe(false);

  // delete, and a write of the same key while it is terminating: waits, then a new resource
  await put(3);
  store.get(key)!.metadata.finalizers = ['gw.io/session-cleanup'];
  finalizerMs = undefined;
  const err = await backend.deleteKey(h).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(NotReadyError);
  expect((err as Error).message).toMatch(
    /^AccessKey team\/key-[0-9a-f]{16} is being deleted, but still exists after 1 s: the controller has not finished its cleanup yet/,
  );
  expect(await backend.getKey(h)).toBeUndefined();
  expect(await backend.listKeys()).not.toContain(h);
  setTimeout(() => store.delete(key), 300).unref(); // the controller comes back
  t0 = Date.now();
  await put(4);
  expect(Date.now() - t0).toBeGreaterThanOrEqual(250);
  expect(store.get(key)!.metadata.generation).toBe(1);
  expect(store.get(key)!.metadata.deletionTimestamp).toBeUndefined();
  expect(await backend.getKey(h)).toMatchObject({ spec: { rate: 4, per: 1 } });
  finalizerMs = 50;
  expect(await backend.deleteKey(h)).toBe(true);
});

test('two facade replicas writing one new key at once: both succeed (409 → re-read and replace), one resource', async () => {
  const other = new KubeBackend({ api: apiOf(server), readyTimeoutMs: 1000 });
  const h = sha256hex('raced');
  const rec = (rate: number) => ({
    namespace: 'team',
    name: keyResourceName(h),
    spec: { rate, per: 1 },
    suppressReset: true,
  });
  requests.length = 0;
  createDelayMs = 150;
  try {
    await Promise.all([backend.putKey(h, rec(1)), other.putKey(h, rec(2))]);
  } finally {
    createDelayMs = 0;
  }
  expect(requests.filter((r) => r.startsWith('POST /apis/')).length).toBe(2); // both tried to create
  // the loser replaced (once; again only if its replace met a newer version, as under a loaded machine)
  expect(requests.filter((r) => r.startsWith('PUT /apis/')).length).toBeGreaterThanOrEqual(1);
  expect([1, 2]).toContain(AccessKeyResource.parse(store.get(`accesskeys/team/${keyResourceName(h)}`)).spec.rate);
  expect(await backend.deleteKey(h)).toBe(true);
});

/** The Secret of client secrets as the chart creates it (empty, Helm's labels and ownership annotations). */
function chartSecret(): Obj {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    type: 'Opaque',
    metadata: {
      name: FACADE_CLIENT_SECRETS,
      namespace: 'team',
      labels: { 'app.kubernetes.io/managed-by': 'Helm', 'gw.io/secret': 'true' },
      annotations: { 'meta.helm.sh/release-name': 'gw', 'helm.sh/resource-policy': 'keep' },
    },
  };
}

test('clients: a key in the facade’s one Secret + OAuthClient; list/get with the secret; delete takes the key; the chart’s metadata kept', async () => {
  const name = clientResourceName('team', 'pets-id', 'c1');
  const other = clientResourceName('team', 'pets-id', 'c0');
  const shared = `secrets/team/${FACADE_CLIENT_SECRETS}`;
  const dataOf = (): Record<string, string> => (store.get(shared) as unknown as { data: Record<string, string> }).data;
  store.set(shared, chartSecret());
  requests.length = 0;
  for (const [n, id, secret] of [
    [other, 'c0', 's0'],
    [name, 'c1', 's3'],
  ] as const)
    await backend.putClient({
      namespace: 'team',
      name: n,
      secret,
      spec: { api_id: 'pets-id', client_id: id, secretRef: { name: `${n}-secret`, key: 'secret' } },
    });
  expect(store.has(`secrets/team/${name}-secret`)).toBe(false);
  // replaced, never created: the facade has no Secret create (docs/helm.md "RBAC")
  expect(requests.filter((r) => r.includes('/secrets') && !r.startsWith('GET ') && !r.startsWith('PUT '))).toEqual([]);
  expect(Object.keys(dataOf()).sort()).toEqual([name, other].sort());
  // only data changed: Helm's labels and ownership annotations stay, so `helm upgrade` keeps owning it
  expect(store.get(shared)!.metadata).toMatchObject({
    labels: chartSecret().metadata.labels,
    annotations: chartSecret().metadata.annotations,
  });
  expect(store.get(shared)!.type).toBe('Opaque');
  expect(Buffer.from(dataOf()[name]!, 'base64').toString('utf8')).toBe('s3');
  expect(
    (store.get(`oauthclients/team/${name}`) as unknown as { spec: { secretRef: unknown } }).spec.secretRef,
  ).toEqual({
    name: FACADE_CLIENT_SECRETS,
    key: name,
  });
  expect((await backend.getClient('pets-id', 'c1'))?.secret).toBe('s3');
  expect((await backend.listClients('pets-id')).map((c) => c.secret).sort()).toEqual(['s0', 's3']);
  expect(await backend.deleteClient('pets-id', 'c1')).toBe(true);
  expect(Object.keys(dataOf())).toEqual([other]);
  expect(await backend.deleteClient('pets-id', 'c1')).toBe(false);
  await backend.deleteClient('pets-id', 'c0');
  expect(dataOf()).toEqual({});
});

test('clients: the Secret of client secrets missing, or without the controller’s label → SetupError naming it, nothing written', async () => {
  const shared = `secrets/team/${FACADE_CLIENT_SECRETS}`;
  const put = () =>
    backend.putClient({
      namespace: 'team',
      name: 'x',
      secret: 's',
      spec: { api_id: 'pets-id', client_id: 'c2', secretRef: { name: 'x-secret', key: 'secret' } },
    });
  store.delete(shared);
  requests.length = 0;
  const missing = await put().then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(missing).toBeInstanceOf(SetupError);
  expect((missing as Error).message).toContain(`team/${FACADE_CLIENT_SECRETS}`);
  expect((missing as Error).message).toContain('does not exist');
  expect(requests.filter((r) => !r.startsWith('GET '))).toEqual([]); // no create, no OAuthClient
  expect(store.has(shared)).toBe(false);
  store.set(shared, { apiVersion: 'v1', kind: 'Secret', metadata: { name: FACADE_CLIENT_SECRETS, namespace: 'team' } });
  await expect(put()).rejects.toThrow(/has no label gw\.io\/secret/);
  expect(store.has('oauthclients/team/x')).toBe(false);
});

test('two facade replicas adding clients at once: every secret lands in the one Secret (409 → re-read, write again)', async () => {
  const other = new KubeBackend({ api: apiOf(server), readyTimeoutMs: 1000 });
  const shared = `secrets/team/${FACADE_CLIENT_SECRETS}`;
  store.set(shared, chartSecret());
  const put = (b: KubeBackend, id: string) =>
    b.putClient({
      namespace: 'team',
      name: clientResourceName('team', 'pets-id', id),
      secret: `secret-${id}`,
      spec: { api_id: 'pets-id', client_id: id, secretRef: { name: 'unused', key: 'secret' } },
    });
  const ids = ['r1', 'r2', 'r3', 'r4', 'r5', 'r6'];
  await Promise.all(ids.map((id, i) => put(i % 2 ? other : backend, id)));
  const data = (store.get(shared) as unknown as { data: Record<string, string> }).data;
  expect(Object.keys(data).sort()).toEqual(ids.map((id) => clientResourceName('team', 'pets-id', id)).sort());
  for (const id of ids) expect((await backend.getClient('pets-id', id))?.secret).toBe(`secret-${id}`);
  await Promise.all(ids.map((id, i) => (i % 2 ? other : backend).deleteClient('pets-id', id)));
  expect((store.get(shared) as unknown as { data: Record<string, string> }).data).toEqual({});
});

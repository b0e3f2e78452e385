/**
 * KubeBackend against a minimal in-memory API server over real HTTP (CRUD of the gw.io custom objects
 * and Secrets, and a "controller" that sets status.observedGeneration after a delay).
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { KubeConfig } from '@kubernetes/client-node';
import { KubeBackend } from '../../../controller/facade/backend-kube.js';
import { clientResourceName, ConflictError, keyResourceName, NotReadyError } from '../../../controller/facade/backend.js';
import { AccessKeyResource } from '../../../crds/kinds.js';
import { sha256hex } from '../../../lib/hash.js';

type Obj = { metadata: { name: string; namespace?: string; generation?: number; resourceVersion?: string; labels?: Record<string, string>; annotations?: Record<string, string> }; status?: { observedGeneration?: number; conditions?: unknown[] }; [k: string]: unknown };

const store = new Map<string, Obj>(); // key: kind-plural/ns/name
let rv = 1;
let reconcileMs = 50;
/** The Ready condition the fake controller writes with observedGeneration (none when undefined). */
let readyCondition: { type: string; status: string; reason?: string; message?: string } | undefined;
const requests: string[] = [];

function startFakeApiServer(): Promise<Server> {
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
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
        const items = [...store.entries()].filter(([k]) => k.startsWith(prefix) && (!ns || k.startsWith(`${prefix}${ns}/`))).map(([, v]) => v);
        return send(200, { items });
      }
      const key = `${prefix}${ns}/${name ?? (JSON.parse(body) as Obj).metadata.name}`;
      const cur = store.get(key);
      if (req.method === 'GET') return cur ? send(200, cur) : send(404, { kind: 'Status', code: 404 });
      if (req.method === 'DELETE') {
        store.delete(key);
        return cur ? send(200, { kind: 'Status', status: 'Success' }) : send(404, { kind: 'Status', code: 404 });
      }
      const obj = JSON.parse(body) as Obj;
      if (req.method === 'POST' && cur) return send(409, { kind: 'Status', code: 409 });
      if (req.method === 'PUT' && (!cur || cur.metadata.resourceVersion !== obj.metadata.resourceVersion)) return send(409, { kind: 'Status', code: 409 });
      obj.metadata.generation = (cur?.metadata.generation ?? 0) + 1;
      obj.metadata.resourceVersion = String(rv++);
      obj.metadata.namespace = ns;
      store.set(key, obj);
      if (plural !== 'secrets') {
        const g = obj.metadata.generation;
        setTimeout(() => {
          const now = store.get(key);
          if (now && now.metadata.generation === g) now.status = { observedGeneration: g, ...(readyCondition ? { conditions: [readyCondition] } : {}) };
        }, reconcileMs).unref();
      }
      send(req.method === 'POST' ? 201 : 200, obj);
    });
  });
  return new Promise((r) => server.listen(0, '127.0.0.1', () => r(server)));
}

let server: Server;
let backend: KubeBackend;

beforeAll(async () => {
  server = await startFakeApiServer();
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, skipTLSVerify: true }],
    users: [{ name: 'u' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  });
  backend = new KubeBackend({ kc, readyTimeoutMs: 1000 });
  store.set('apidefinitions/team/pets', {
    apiVersion: 'gw.io/v1alpha1', kind: 'ApiDefinition', metadata: { name: 'pets', namespace: 'team' }, spec: { api_id: 'pets-id', proxy: { listen_path: '/pets/' } },
  });
  store.set('policies/team/gold', { apiVersion: 'gw.io/v1alpha1', kind: 'Policy', metadata: { name: 'gold', namespace: 'team' }, spec: { rate: 1, per: 1 } });
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

test('APIs by api_id across namespaces; policies by name', async () => {
  expect(await backend.getApi(undefined, 'pets-id')).toEqual({ namespace: 'team', name: 'pets', apiId: 'pets-id' });
  expect(await backend.getApi('other', 'pets-id')).toBeUndefined();
  expect(await backend.getPolicy('team', 'gold')).toEqual({ namespace: 'team', name: 'gold' });
  expect(await backend.getPolicy('team', 'nope')).toBeUndefined();
});

test('keys: create waits for the controller, replace keeps the resource, annotation, delete', async () => {
  const h = sha256hex('k');
  const t0 = Date.now();
  await backend.putKey(h, { namespace: 'team', name: keyResourceName(h), spec: { rate: 1, per: 1 }, suppressReset: true });
  expect(Date.now() - t0).toBeGreaterThanOrEqual(40);
  const stored = AccessKeyResource.parse(store.get(`accesskeys/team/${keyResourceName(h)}`));
  expect(stored.spec).toEqual({ rate: 1, per: 1, key_hash: h });
  expect(stored.metadata.annotations).toEqual({ 'gw.io/suppress-reset': 'true' });
  expect(stored.status?.observedGeneration).toBe(1);
  await backend.putKey(h, { namespace: 'team', name: keyResourceName(h), spec: { rate: 2, per: 1 }, suppressReset: false });
  expect(await backend.getKey(h)).toEqual({ namespace: 'team', name: keyResourceName(h), spec: { rate: 2, per: 1 }, suppressReset: false });
  expect(await backend.listKeys()).toEqual([h]);
  expect(await backend.deleteKey(h)).toBe(true);
  expect(await backend.deleteKey(h)).toBe(false);
});

test('a write the controller never reconciles fails after readyTimeoutMs with NotReadyError; the resource exists', async () => {
  reconcileMs = 60_000;
  const h = sha256hex('slow');
  const t0 = Date.now();
  const err = await backend.putKey(h, { namespace: 'team', name: keyResourceName(h), spec: {}, suppressReset: false }).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(NotReadyError);
  expect((err as Error).message).toMatch(/^AccessKey team\/key-[0-9a-f]{16} was written and exists, but is not Ready after 1 s: the controller has not reconciled it yet/);
  expect(Date.now() - t0).toBeGreaterThanOrEqual(900);
  expect(await backend.getKey(h)).toMatchObject({ namespace: 'team', spec: {} });
  reconcileMs = 50;
  await backend.deleteKey(h);
});

test('Ready=False for the written generation is not ready: NotReadyError carries the controller reason', async () => {
  readyCondition = { type: 'Ready', status: 'False', reason: 'PolicyMissing', message: 'policy gold not found' };
  const h = sha256hex('refused');
  try {
    const err = await backend.putKey(h, { namespace: 'team', name: keyResourceName(h), spec: {}, suppressReset: false }).catch((e: unknown) => e);
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

test('clients: Secret + OAuthClient; list/get with the secret; delete takes the Secret; foreign Secret → conflict', async () => {
  const name = clientResourceName('team', 'pets-id', 'c1');
  await backend.putClient({ namespace: 'team', name, secret: 's3', spec: { api_id: 'pets-id', client_id: 'c1', secretRef: { name: `${name}-secret`, key: 'secret' } } });
  expect(store.has(`secrets/team/${name}-secret`)).toBe(true);
  expect((await backend.getClient('pets-id', 'c1'))?.secret).toBe('s3');
  expect((await backend.listClients('pets-id')).length).toBe(1);
  expect(await backend.deleteClient('pets-id', 'c1')).toBe(true);
  expect(store.has(`secrets/team/${name}-secret`)).toBe(false);
  expect(await backend.deleteClient('pets-id', 'c1')).toBe(false);
  store.set('secrets/team/theirs', { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'theirs', namespace: 'team' } });
  await expect(
    backend.putClient({ namespace: 'team', name: 'x', secret: 's', spec: { api_id: 'pets-id', client_id: 'c2', secretRef: { name: 'theirs', key: 'secret' } } }),
  ).rejects.toBeInstanceOf(ConflictError);
});

/**
 * How gw's processes (controller, sidecar) reach the API server: server URL, auth headers and one
 * keep-alive undici Agent. Read straight from the kubeconfig (YAML, zod-validated) or the in-cluster
 * service account, so they do not load @kubernetes/client-node for the common cases (its generated API
 * code alone would be most of the controller's and the sidecar's RSS: docs/operator.md, "Scale"). Token, client certificate and basic auth are
 * handled here; a kubeconfig whose user needs an exec plugin or an auth provider falls back to
 * client-node's KubeConfig (loaded on demand) for the headers and TLS.
 */
import { Agent, type Dispatcher } from '../http/undici.js';
import { parse } from 'yaml';
import { z } from 'zod';
import { firstLine } from '../errors.js';
import { KUBE_KEEP_ALIVE_MS } from '../tuning.js';
/**
 * The API server's connections. undici (8) negotiates HTTP/2, where every request shares one connection;
 * a connection that died silently is found by undici's PING probe after a stream times out (probe
 * timeout = that stream's timeout), so the watch's idle timeout (WATCH_IDLE_MS) bounds how long a
 * partition goes unnoticed. Not HTTP/1.1 only: that loads undici's llhttp WASM at start, which every idle
 * sidecar would carry.
 */
export const KUBE_AGENT_OPTIONS = { keepAliveTimeout: KUBE_KEEP_ALIVE_MS } as const;

const { readFileSync } = process.getBuiltinModule('node:fs');
const { dirname, isAbsolute, join } = process.getBuiltinModule('node:path');

export interface KubeConnection {
  server: string;
  headers(): Promise<Record<string, string>>;
  dispatcher?: Dispatcher;
}

const ClusterSchema = z.looseObject({
  server: z.string().url(),
  'certificate-authority': z.string().optional(),
  'certificate-authority-data': z.string().optional(),
  'insecure-skip-tls-verify': z.boolean().optional(),
  'tls-server-name': z.string().optional(),
  'proxy-url': z.string().optional(),
});
const UserSchema = z.looseObject({
  token: z.string().optional(),
  tokenFile: z.string().optional(),
  'client-certificate': z.string().optional(),
  'client-certificate-data': z.string().optional(),
  'client-key': z.string().optional(),
  'client-key-data': z.string().optional(),
  username: z.string().optional(),
  password: z.string().optional(),
  exec: z.unknown().optional(),
  'auth-provider': z.unknown().optional(),
});
const KubeconfigSchema = z.looseObject({
  'current-context': z.string().optional(),
  clusters: z.array(z.looseObject({ name: z.string(), cluster: ClusterSchema })),
  users: z.array(z.looseObject({ name: z.string(), user: UserSchema })).nullish(),
  contexts: z.array(
    z.looseObject({ name: z.string(), context: z.looseObject({ cluster: z.string(), user: z.string().optional() }) }),
  ),
});

const SA_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

function tokenReader(file: string): () => string {
  let cached: { value: string; at: number } | undefined;
  return () => {
    if (!cached || Date.now() - cached.at > 60_000)
      cached = { value: readFileSync(file, 'utf8').trim(), at: Date.now() };
    return cached.value;
  };
}

/** --kubeconfig FILE, or the in-cluster service account when no file is given. */
export async function loadKubeConnection(file?: string): Promise<KubeConnection> {
  try {
    return file ? await fromFile(file) : inCluster();
  } catch (e) {
    throw new Error(`--kubeconfig: cannot load ${file ?? 'in-cluster config'}: ${(e as Error).message}`, { cause: e });
  }
}

function inCluster(): KubeConnection {
  const host = process.env.KUBERNETES_SERVICE_HOST;
  const port = process.env.KUBERNETES_SERVICE_PORT ?? '443';
  if (!host) throw new Error('not running in a cluster (KUBERNETES_SERVICE_HOST unset) and no --kubeconfig given');
  const token = tokenReader(join(SA_DIR, 'token'));
  const server = `https://${host.includes(':') ? `[${host}]` : host}:${port}`;
  return {
    server,
    headers: async () => ({ authorization: `Bearer ${token()}` }),
    dispatcher: new Agent({ ...KUBE_AGENT_OPTIONS, connect: { ca: readFileSync(join(SA_DIR, 'ca.crt')) } }),
  };
}

async function fromFile(file: string): Promise<KubeConnection> {
  const text = readFileSync(file, 'utf8');
  let doc: unknown;
  try {
    doc = parse(text);
  } catch (e) {
    throw new Error(`invalid YAML: ${firstLine((e as Error).message)}`, { cause: e });
  }
  const parsed = KubeconfigSchema.safeParse(doc);
  if (!parsed.success) {
    const i = parsed.error.issues[0]!;
    throw new Error(`${i.path.join('.')}: ${i.message}`);
  }
  const kc = parsed.data;
  const ctxName = kc['current-context'];
  const context = kc.contexts.find((c) => c.name === ctxName)?.context ?? kc.contexts[0]?.context;
  if (!context) throw new Error('no current context');
  const cluster = kc.clusters.find((c) => c.name === context.cluster)?.cluster;
  if (!cluster) throw new Error(`cluster ${context.cluster} not found`);
  const user: z.infer<typeof UserSchema> =
    (context.user ? kc.users?.find((u) => u.name === context.user)?.user : undefined) ?? {};
  if (user.exec || user['auth-provider'] || cluster['proxy-url']) return viaClientNode(file);

  const rel = (p: string): string => (isAbsolute(p) ? p : join(dirname(file), p));
  const pem = (data: string | undefined, path: string | undefined): Buffer | undefined =>
    data ? Buffer.from(data, 'base64') : path ? readFileSync(rel(path)) : undefined;
  const ca = pem(cluster['certificate-authority-data'], cluster['certificate-authority']);
  const cert = pem(user['client-certificate-data'], user['client-certificate']);
  const key = pem(user['client-key-data'], user['client-key']);
  const tokenFile = user.tokenFile ? tokenReader(rel(user.tokenFile)) : undefined;
  const headers = async (): Promise<Record<string, string>> => {
    if (user.token) return { authorization: `Bearer ${user.token}` };
    if (tokenFile) return { authorization: `Bearer ${tokenFile()}` };
    if (user.username !== undefined)
      return { authorization: `Basic ${Buffer.from(`${user.username}:${user.password ?? ''}`).toString('base64')}` };
    return {};
  };
  const server = cluster.server.replace(/\/$/, '');
  const tls = server.startsWith('https:');
  return {
    server,
    headers,
    dispatcher: tls
      ? new Agent({
          connect: {
            ...(ca ? { ca } : {}),
            ...(cert ? { cert } : {}),
            ...(key ? { key } : {}),
            rejectUnauthorized: !cluster['insecure-skip-tls-verify'],
            ...(cluster['tls-server-name'] ? { servername: cluster['tls-server-name'] } : {}),
          },
          ...KUBE_AGENT_OPTIONS,
        })
      : new Agent(KUBE_AGENT_OPTIONS),
  };
}

/** Exec plugins, auth providers, proxies: client-node's KubeConfig does the authentication. */
async function viaClientNode(file: string): Promise<KubeConnection> {
  const k8s = await import('@kubernetes/client-node');
  const kc = new k8s.KubeConfig();
  kc.loadFromFile(file);
  const server = kc.getCurrentCluster()!.server.replace(/\/$/, '');
  let dispatcher: Dispatcher | undefined;
  let auth: { headers: Record<string, string>; at: number } | undefined;
  const refresh = async (): Promise<Record<string, string>> => {
    if (auth && Date.now() - auth.at < 60_000) return auth.headers;
    const ctx = new k8s.RequestContext(server, k8s.HttpMethod.GET);
    await kc.applySecurityAuthentication(ctx);
    // client-node builds a new Agent on every call: keep the first one
    dispatcher ??= ctx.getDispatcher() as Dispatcher | undefined;
    auth = { headers: { ...(ctx.getHeaders() as Record<string, string>) }, at: Date.now() };
    return auth.headers;
  };
  await refresh();
  return {
    server,
    headers: refresh,
    get dispatcher() {
      return dispatcher;
    },
  };
}

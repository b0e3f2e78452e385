/**
 * Sidecar injection as a pure function: Pod in, JSON patch out (docs/helm.md, "Sidecar injection").
 *
 * Port rewiring, the named-port convention: Services should target the app's port by name
 * (`targetPort: http`). The webhook renames the app's port `http` → `gw-upstream` (the app keeps
 * listening where it always did) and gives the name `http` to the sidecar's listen port, so the Service
 * sends traffic to the sidecar, which forwards to 127.0.0.1:<app port>. Without such a port the pod
 * names its app port with `gw.io/upstream-port`; the sidecar then listens on `gw.io/listen-port`
 * (default 15080) and the Service must target that port.
 *
 * Idempotent: a pod that already has the `gw-sidecar` container is left alone, so a second admission
 * (reinvocation, a re-created pod spec) never adds a second sidecar. A pod the webhook cannot inject
 * (no usable port, port clash) is admitted unchanged with a warning: injection never blocks a pod.
 */
import type { JsonPatchOp, Pod, PodContainer } from './admission.js';
import { heapNodeOptions } from './node-options.js';

export const SIDECAR_NAME = 'gw-sidecar';
export const ANN = {
  inject: 'gw.io/inject',
  upstreamPort: 'gw.io/upstream-port',
  portName: 'gw.io/port-name',
  listenPort: 'gw.io/listen-port',
  metricsPort: 'gw.io/metrics-port',
  group: 'gw.io/group',
  tlsSecret: 'gw.io/tls-secret',
  tlsClientCa: 'gw.io/tls-client-ca',
  tlsMinVersion: 'gw.io/tls-min-version',
  h2c: 'gw.io/h2c',
  status: 'gw.io/status',
} as const;
export const UPSTREAM_PORT_NAME = 'gw-upstream';
const DEFAULT_PORT_NAME = 'http';

export interface InjectOptions {
  image: string;
  imagePullPolicy: 'Always' | 'IfNotPresent' | 'Never';
  listenPort: number;
  metricsPort: number;
  /** Secret in the pod's namespace whose key `url` is the Redis URL (optional: absent → no Redis). */
  redisSecretName?: string;
  /** ConfigMap in the pod's namespace mounted as the sidecar's --config file, when set (optional). */
  configMapName?: string;
  /**
   * The namespaces that have that ConfigMap (the chart creates it in `sidecar.namespaces` only); pods of
   * other namespaces get no --config (a sidecar refuses a --config file that is not there). Undefined:
   * every namespace.
   */
  configNamespaces?: string[];
  resources: {
    requests: { cpu: string; memory: string };
    limits: { cpu?: string; memory: string };
  };
  runAsUser: number;
  /** NODE_OPTIONS of the sidecar; default: the heap flags derived from the memory limit (node-options.ts). */
  nodeOptions?: string;
  /**
   * Seconds a terminating pod keeps serving while the Service takes it out of its endpoints: the sidecar's
   * preStop hook (GET /prestop, `--drain-delay`) and, when the app container has no preStop of its own, a
   * preStop sleep of this + APP_GRACE_EXTRA_SECONDS on it (docs/helm.md, "Termination"). 0: neither.
   */
  drainDelaySeconds?: number;
  /**
   * TLS on every injected sidecar's gateway listener unless a pod says otherwise (`gw.io/tls-secret`): the
   * Secret of the pod's namespace (keys `tls.crt`, `tls.key`, and `ca.crt` with clientCa) mounted read-only.
   */
  tls?: { secretName: string; clientCa: boolean; minVersion?: TlsMinVersion };
  /** h2c on the sidecars' plain listener (`--h2c`); undefined: the sidecar's own (its config file, else on). */
  h2c?: boolean;
}

export type TlsMinVersion = 'TLSv1.2' | 'TLSv1.3';
/** Where the TLS Secret is mounted in the sidecar (beside /etc/gw, not inside that ConfigMap volume). */
export const TLS_MOUNT_PATH = '/etc/gw-tls';
export const TLS_VOLUME = 'gw-sidecar-tls';
/** A Secret's name: a DNS-1123 subdomain (what the API server would refuse in the volume otherwise). */
export const SECRET_NAME = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** The pod's TLS and h2c, from its annotations over the webhook's defaults; a string says what is wrong. */
export interface ListenerChoice {
  tls?: { secretName: string; clientCa: boolean; minVersion?: TlsMinVersion };
  h2c?: boolean;
}
export function listenerChoice(ann: Record<string, string>, o: InjectOptions): ListenerChoice | string {
  const bool = (key: string): boolean | string | undefined => {
    const v = ann[key];
    if (v === undefined) return undefined;
    const t = v.trim().toLowerCase();
    if (t === 'true' || t === 'false') return t === 'true';
    return `${key}: ${JSON.stringify(v)} is not "true" or "false"`;
  };
  const given = ann[ANN.tlsSecret];
  const secretName = given !== undefined ? given.trim() : o.tls?.secretName;
  if (secretName !== undefined && secretName !== '' && (secretName.length > 253 || !SECRET_NAME.test(secretName)))
    return `${ANN.tlsSecret}: ${JSON.stringify(given)} is not a Secret name (lowercase letters, digits, '-' and '.', at most 253)`;
  const clientCa = bool(ANN.tlsClientCa);
  if (typeof clientCa === 'string') return clientCa;
  const h2c = bool(ANN.h2c);
  if (typeof h2c === 'string') return h2c;
  const minGiven = ann[ANN.tlsMinVersion];
  if (minGiven !== undefined && minGiven.trim() !== 'TLSv1.2' && minGiven.trim() !== 'TLSv1.3')
    return `${ANN.tlsMinVersion}: ${JSON.stringify(minGiven)} is not TLSv1.2 or TLSv1.3`;
  const minVersion = (minGiven?.trim() as TlsMinVersion | undefined) ?? o.tls?.minVersion;
  const choice: ListenerChoice = {};
  if (secretName) {
    choice.tls = { secretName, clientCa: clientCa ?? o.tls?.clientCa ?? false, ...(minVersion ? { minVersion } : {}) };
  } else if (clientCa === true || minGiven !== undefined) {
    return `${clientCa === true ? ANN.tlsClientCa : ANN.tlsMinVersion} needs a TLS Secret (${ANN.tlsSecret})`;
  }
  const h2cValue = h2c ?? o.h2c;
  if (h2cValue !== undefined) choice.h2c = h2cValue;
  return choice;
}

/** The app outlives the sidecar's drain by this much: the sidecar's last proxied requests still find it. */
export const APP_GRACE_EXTRA_SECONDS = 2;

export const defaultInjectOptions: InjectOptions = {
  image: 'gw:0.1.0',
  imagePullPolicy: 'IfNotPresent',
  listenPort: 15080,
  metricsPort: 15090,
  redisSecretName: 'gw-redis',
  resources: { requests: { cpu: '50m', memory: '128Mi' }, limits: { memory: '256Mi' } },
  runAsUser: 10001,
  drainDelaySeconds: 5,
};

export interface InjectResult {
  /** JSON patch (RFC 6902) to apply; empty when the pod is left unchanged. */
  patch: JsonPatchOp[];
  /** Why the pod was (or was not) changed, for the log line. */
  outcome: 'injected' | 'not-requested' | 'already-injected' | 'refused';
  warnings: string[];
}

const escape = (s: string): string => s.replace(/~/g, '~0').replace(/\//g, '~1');

function port(value: string | undefined, what: string): number | string | undefined {
  if (value === undefined) return undefined;
  if (!/^\d+$/.test(value.trim())) return `${what}: ${JSON.stringify(value)} is not a port number`;
  const n = Number(value.trim());
  if (n < 1 || n > 65535) return `${what}: ${n} is out of range 1..65535`;
  return n;
}

function usedPorts(containers: PodContainer[]): Set<number> {
  return new Set(containers.flatMap((c) => (c.ports ?? []).map((p) => p.containerPort)));
}

export function sidecarContainer(
  o: InjectOptions,
  a: {
    upstreamPort: number;
    listenPort: number;
    metricsPort: number;
    group: string;
    portName: string;
    config: boolean;
    /** The pod mounts no ServiceAccount token: the sidecar mounts its own (sidecarTokenVolume). */
    ownToken?: boolean;
    /** TLS and h2c of its gateway listener (listenerChoice). */
    listener?: ListenerChoice;
  },
): Record<string, unknown> {
  const env: Record<string, unknown>[] = [
    { name: 'GW_NAMESPACE', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } },
    // glibc's malloc arenas: two instead of one per thread (the proxy allocates on its main thread), for a
    // smaller idle RSS per pod (docs/benchmarks.md, "Memory under load")
    { name: 'MALLOC_ARENA_MAX', value: '2' },
    // V8's heap limits, in step with the container's memory limit (docs/helm.md, "Memory")
    { name: 'NODE_OPTIONS', value: o.nodeOptions ?? heapNodeOptions(o.resources.limits.memory) },
  ];
  if (o.redisSecretName)
    env.push({
      name: 'GW_REDIS',
      valueFrom: { secretKeyRef: { name: o.redisSecretName, key: 'url', optional: true } },
    });
  const args = [
    'sidecar',
    '--upstream',
    `http://127.0.0.1:${a.upstreamPort}`,
    '--listen',
    `0.0.0.0:${a.listenPort}`,
    '--metrics-listen',
    `0.0.0.0:${a.metricsPort}`,
    '--group',
    a.group,
  ];
  const c: Record<string, unknown> = {
    name: SIDECAR_NAME,
    image: o.image,
    imagePullPolicy: o.imagePullPolicy,
    args,
    env,
    ports: [
      { name: a.portName, containerPort: a.listenPort, protocol: 'TCP' },
      { name: 'gw-metrics', containerPort: a.metricsPort, protocol: 'TCP' },
    ],
    readinessProbe: { httpGet: { path: '/readyz', port: a.metricsPort }, periodSeconds: 5, failureThreshold: 3 },
    livenessProbe: { httpGet: { path: '/healthz', port: a.metricsPort }, periodSeconds: 10, failureThreshold: 3 },
    resources: { requests: { ...o.resources.requests }, limits: { ...o.resources.limits } },
    securityContext: {
      runAsNonRoot: true,
      runAsUser: o.runAsUser,
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ['ALL'] },
      seccompProfile: { type: 'RuntimeDefault' },
    },
  };
  const mounts: Record<string, unknown>[] = [];
  const delay = o.drainDelaySeconds ?? 0;
  if (delay > 0) {
    args.push('--drain-delay', String(delay));
    c.lifecycle = { preStop: { httpGet: { path: '/prestop', port: a.metricsPort } } };
  }
  if (a.config) {
    // the mounted file to start with, its ConfigMap watched through the API for live changes
    args.push('--config', '/etc/gw/config.yaml');
    if (o.configMapName) args.push('--config-map', o.configMapName);
    mounts.push({ name: 'gw-sidecar-config', mountPath: '/etc/gw', readOnly: true });
  }
  if (a.ownToken) mounts.push({ name: SIDECAR_TOKEN_VOLUME, mountPath: SA_MOUNT_PATH, readOnly: true });
  const tls = a.listener?.tls;
  if (tls) {
    // the Secret volume's files are symlinks through ..data, swapped by the kubelet on an update: the sidecar
    // reads the files again every 2 s and serves a changed pair to new connections (docs/proxy.md)
    args.push('--tls-cert', `${TLS_MOUNT_PATH}/tls.crt`, '--tls-key', `${TLS_MOUNT_PATH}/tls.key`);
    if (tls.clientCa) args.push('--tls-client-ca', `${TLS_MOUNT_PATH}/ca.crt`);
    if (tls.minVersion) args.push('--tls-min-version', tls.minVersion);
    mounts.push({ name: TLS_VOLUME, mountPath: TLS_MOUNT_PATH, readOnly: true });
  }
  if (a.listener?.h2c !== undefined) args.push('--h2c', String(a.listener.h2c));
  if (mounts.length) c.volumeMounts = mounts;
  return c;
}

/** Where the kubelet mounts a ServiceAccount token; the sidecar's API client reads it there. */
const SA_MOUNT_PATH = '/var/run/secrets/kubernetes.io/serviceaccount';
const SIDECAR_TOKEN_VOLUME = 'gw-sidecar-token';

/**
 * A pod with `automountServiceAccountToken: false` gives no container a token, but the sidecar reads its
 * config through the API: it gets the same projected volume the kubelet would mount (a bound, rotated
 * token, the cluster CA, the namespace), in its own container only; the app containers stay without one.
 */
const sidecarTokenVolume = (): Record<string, unknown> => ({
  name: SIDECAR_TOKEN_VOLUME,
  projected: {
    defaultMode: 0o444,
    sources: [
      { serviceAccountToken: { path: 'token', expirationSeconds: 3607 } },
      { configMap: { name: 'kube-root-ca.crt', items: [{ key: 'ca.crt', path: 'ca.crt' }] } },
      {
        downwardAPI: {
          items: [{ path: 'namespace', fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.namespace' } }],
        },
      },
    ],
  },
});

/** Decide and build the patch for one Pod. `namespace` is the admission request's namespace. */
export function injectSidecar(pod: Pod, o: InjectOptions, namespace?: string): InjectResult {
  const ann = pod.metadata?.annotations ?? {};
  const labels = pod.metadata?.labels ?? {};
  const containers = pod.spec.containers;
  const none = (outcome: InjectResult['outcome'], warnings: string[] = []): InjectResult => ({
    patch: [],
    outcome,
    warnings,
  });

  if ((ann[ANN.inject] ?? '').toLowerCase() !== 'true') return none('not-requested');
  if (containers.some((c) => c.name === SIDECAR_NAME)) return none('already-injected');
  const refuse = (why: string): InjectResult => none('refused', [`gw sidecar not injected: ${why}`]);

  const portName = ann[ANN.portName] ?? DEFAULT_PORT_NAME;
  let named: { ci: number; pi: number; port: number } | undefined;
  containers.forEach((c, ci) =>
    (c.ports ?? []).forEach((p, pi) => {
      if (!named && p.name === portName) named = { ci, pi, port: p.containerPort };
    }),
  );
  const explicit = port(ann[ANN.upstreamPort], ANN.upstreamPort);
  if (typeof explicit === 'string') return refuse(explicit);
  const upstreamPort = explicit ?? named?.port;
  if (upstreamPort === undefined) {
    return refuse(
      `no container port named "${portName}" and no ${ANN.upstreamPort} annotation: the sidecar does not know where the app listens`,
    );
  }
  const listenPort = port(ann[ANN.listenPort], ANN.listenPort) ?? o.listenPort;
  const metricsPort = port(ann[ANN.metricsPort], ANN.metricsPort) ?? o.metricsPort;
  if (typeof listenPort === 'string') return refuse(listenPort);
  if (typeof metricsPort === 'string') return refuse(metricsPort);
  // native sidecars (init containers with restartPolicy Always, e.g. a mesh proxy) share the pod's ports too
  const inits = ((pod.spec as Record<string, unknown>).initContainers ?? []) as PodContainer[];
  const used = usedPorts([
    ...containers,
    ...(Array.isArray(inits) ? inits.filter((c) => (c as Record<string, unknown>).restartPolicy === 'Always') : []),
  ]);
  for (const [what, p] of [
    ['listen port', listenPort],
    ['metrics port', metricsPort],
  ] as const) {
    if (p === upstreamPort || used.has(p))
      return refuse(
        `the sidecar's ${what} ${p} is already used in this pod (set ${what === 'listen port' ? ANN.listenPort : ANN.metricsPort})`,
      );
  }
  if (listenPort === metricsPort) return refuse(`listen port and metrics port are both ${listenPort}`);
  const rewire = named !== undefined && named.port === upstreamPort;
  if (rewire && containers.some((c) => (c.ports ?? []).some((p) => p.name === UPSTREAM_PORT_NAME))) {
    return refuse(`a container port is already named "${UPSTREAM_PORT_NAME}"`);
  }

  const listener = listenerChoice(ann, o);
  if (typeof listener === 'string') return refuse(listener);
  const group = ann[ANN.group] ?? labels['app.kubernetes.io/name'] ?? labels.app ?? 'default';
  const config =
    o.configMapName !== undefined &&
    (o.configNamespaces === undefined || (namespace !== undefined && o.configNamespaces.includes(namespace)));
  const ownToken = pod.spec.automountServiceAccountToken === false;
  const sidecar = sidecarContainer(o, {
    upstreamPort,
    listenPort,
    metricsPort,
    group,
    portName: rewire ? portName : 'gw-proxy',
    config,
    ownToken,
    listener,
  });
  const patch: JsonPatchOp[] = [];
  if (rewire && named) {
    patch.push({
      op: 'replace',
      path: `/spec/containers/${named.ci}/ports/${named.pi}/name`,
      value: UPSTREAM_PORT_NAME,
    });
    // the app's own probes and lifecycle hooks that name the port follow it (a named probe port resolves
    // only among the probed container's ports: left as "http" they would fail, the pod never Ready)
    patch.push(...portReferences(containers[named.ci]!, named.ci, portName));
  }
  patch.push(...appPreStop(containers, named?.ci ?? containers.findIndex((c) => usedPorts([c]).has(upstreamPort)), o));
  patch.push({ op: 'add', path: '/spec/containers/-', value: sidecar });
  const volumes: Record<string, unknown>[] = [];
  if (config) volumes.push({ name: 'gw-sidecar-config', configMap: { name: o.configMapName, optional: true } });
  if (ownToken) volumes.push(sidecarTokenVolume());
  if (listener.tls) {
    // the keys named: a Secret without one of them keeps the pod in ContainerCreating with an event naming
    // the key ("couldn't find key tls.key in Secret …"), rather than a sidecar that cannot start
    const keys = ['tls.crt', 'tls.key', ...(listener.tls.clientCa ? ['ca.crt'] : [])];
    volumes.push({
      name: TLS_VOLUME,
      secret: { secretName: listener.tls.secretName, items: keys.map((k) => ({ key: k, path: k })) },
    });
  }
  let hasVolumes = Array.isArray((pod.spec as Record<string, unknown>).volumes);
  for (const volume of volumes) {
    patch.push(
      hasVolumes
        ? { op: 'add', path: '/spec/volumes/-', value: volume }
        : { op: 'add', path: '/spec/volumes', value: [volume] },
    );
    hasVolumes = true;
  }
  patch.push({ op: 'add', path: `/metadata/annotations/${escape(ANN.status)}`, value: 'injected' });
  const warnings: string[] = [];
  if (!rewire)
    warnings.push(`gw sidecar listens on port ${listenPort} (named "gw-proxy"): point the Service's targetPort at it`);
  return { patch, outcome: 'injected', warnings };
}

/**
 * The app container (index `ci`, -1: not found) keeps serving through the sidecar's drain: a preStop sleep
 * of drainDelaySeconds + APP_GRACE_EXTRA_SECONDS, so its SIGTERM comes after the sidecar has stopped
 * taking requests. An app with a preStop of its own is left as it is (it decides when it stops).
 */
function appPreStop(containers: PodContainer[], ci: number, o: InjectOptions): JsonPatchOp[] {
  const delay = o.drainDelaySeconds ?? 0;
  const app = containers[ci] as (PodContainer & { lifecycle?: Record<string, unknown> }) | undefined;
  if (delay <= 0 || !app || app.lifecycle?.preStop !== undefined) return [];
  const preStop = { sleep: { seconds: delay + APP_GRACE_EXTRA_SECONDS } };
  return app.lifecycle
    ? [{ op: 'add', path: `/spec/containers/${ci}/lifecycle/preStop`, value: preStop }]
    : [{ op: 'add', path: `/spec/containers/${ci}/lifecycle`, value: { preStop } }];
}

/** `replace` ops renaming `portName` → gw-upstream in a container's probes and lifecycle handlers. */
function portReferences(c: PodContainer, ci: number, portName: string): JsonPatchOp[] {
  const ops: JsonPatchOp[] = [];
  const visit = (handler: unknown, path: string): void => {
    if (typeof handler !== 'object' || handler === null) return;
    for (const kind of ['httpGet', 'tcpSocket'] as const) {
      const action = (handler as Record<string, unknown>)[kind];
      if (typeof action === 'object' && action !== null && (action as { port?: unknown }).port === portName) {
        ops.push({ op: 'replace', path: `${path}/${kind}/port`, value: UPSTREAM_PORT_NAME });
      }
    }
  };
  const base = `/spec/containers/${ci}`;
  const raw = c as Record<string, unknown>;
  for (const probe of ['livenessProbe', 'readinessProbe', 'startupProbe']) visit(raw[probe], `${base}/${probe}`);
  const lifecycle = raw.lifecycle as Record<string, unknown> | undefined;
  for (const hook of ['postStart', 'preStop']) visit(lifecycle?.[hook], `${base}/lifecycle/${hook}`);
  return ops;
}

/** Applies the subset of RFC 6902 that injectSidecar emits (add, replace; `-` appends). */
export function applyPatch<T>(doc: T, patch: JsonPatchOp[]): T {
  const out = structuredClone(doc) as unknown;
  for (const op of patch) {
    const parts = op.path
      .split('/')
      .slice(1)
      .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
    const last = parts.pop();
    if (last === undefined) throw new Error(`bad patch path ${op.path}`);
    let cur = out as Record<string, unknown> | unknown[];
    for (const p of parts) {
      const next = Array.isArray(cur) ? cur[Number(p)] : cur[p];
      if (typeof next !== 'object' || next === null) throw new Error(`patch path ${op.path}: ${p} is missing`);
      cur = next as Record<string, unknown> | unknown[];
    }
    if (Array.isArray(cur)) {
      if (last === '-' && op.op === 'add') cur.push(op.value);
      else if (op.op === 'add') cur.splice(Number(last), 0, op.value);
      else if (op.op === 'replace') cur[Number(last)] = op.value;
      else cur.splice(Number(last), 1);
    } else if (op.op === 'remove') {
      delete cur[last];
    } else {
      cur[last] = op.value;
    }
  }
  return out as T;
}

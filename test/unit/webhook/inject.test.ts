import { describe, expect, test } from '@jest/globals';
import {
  ANN,
  SIDECAR_NAME,
  TLS_MOUNT_PATH,
  TLS_VOLUME,
  UPSTREAM_PORT_NAME,
  applyPatch,
  defaultInjectOptions,
  injectSidecar,
  sidecarContainer,
} from '../../../webhook/inject.js';
import { PodSchema, type Pod } from '../../../webhook/admission.js';
import { review } from '../../../webhook/server.js';
import { injectOptionsFromFlags, type WebhookFlags } from '../../../cli/webhook.js';

type Obj = Record<string, unknown>;
const o = { ...defaultInjectOptions, image: 'registry.example/gw:1.2.3' };

function pod(
  annotations: Record<string, string> | undefined,
  ports: Obj[] = [{ name: 'http', containerPort: 8080 }],
  labels?: Record<string, string>,
): Pod {
  return PodSchema.parse({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'app', annotations, labels },
    spec: { containers: [{ name: 'app', image: 'app:1', ports }], restartPolicy: 'Always' },
  });
}
const containers = (p: Pod): Obj[] => p.spec.containers as unknown as Obj[];
const sidecarOf = (p: Pod): Obj => {
  const s = containers(p).filter((c) => c.name === SIDECAR_NAME);
  expect(s).toHaveLength(1);
  return s[0]!;
};

describe('injectSidecar', () => {
  test('a pod without the annotation is untouched', () => {
    expect(injectSidecar(pod(undefined), o)).toEqual({ patch: [], outcome: 'not-requested', warnings: [] });
    expect(injectSidecar(pod({ [ANN.inject]: 'false' }), o).patch).toEqual([]);
  });

  test('named-port convention: the app port is renamed, the sidecar takes the name and proxies to the app port', () => {
    const before = pod({ [ANN.inject]: 'true' }, [{ name: 'http', containerPort: 8080 }], {
      'app.kubernetes.io/name': 'orders',
    });
    const r = injectSidecar(before, o);
    expect(r.outcome).toBe('injected');
    expect(r.warnings).toEqual([]);
    const after = applyPatch(before, r.patch);
    expect(containers(after)).toHaveLength(2);
    expect(containers(after)[0]!.ports).toEqual([{ name: UPSTREAM_PORT_NAME, containerPort: 8080 }]);
    const s = sidecarOf(after);
    expect(s.image).toBe('registry.example/gw:1.2.3');
    expect(s.args).toEqual([
      'sidecar',
      '--upstream',
      'http://127.0.0.1:8080',
      '--listen',
      '0.0.0.0:15080',
      '--metrics-listen',
      '0.0.0.0:15090',
      '--group',
      'orders',
      '--drain-delay',
      '5',
    ]);
    expect(s.ports).toEqual([
      { name: 'http', containerPort: 15080, protocol: 'TCP' },
      { name: 'gw-metrics', containerPort: 15090, protocol: 'TCP' },
    ]);
    expect(s.readinessProbe).toMatchObject({ httpGet: { path: '/readyz', port: 15090 } });
    expect(s.livenessProbe).toMatchObject({ httpGet: { path: '/healthz', port: 15090 } });
    expect(s.resources).toEqual({ requests: { cpu: '50m', memory: '128Mi' }, limits: { memory: '256Mi' } });
    expect(s.securityContext).toMatchObject({
      runAsNonRoot: true,
      readOnlyRootFilesystem: true,
      allowPrivilegeEscalation: false,
      capabilities: { drop: ['ALL'] },
    });
    expect(s.env).toEqual([
      { name: 'GW_NAMESPACE', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } },
      { name: 'MALLOC_ARENA_MAX', value: '2' },
      { name: 'NODE_OPTIONS', value: '--expose-gc --max-semi-space-size=8 --v8-pool-size=2 --max-old-space-size=153' },
      { name: 'GW_REDIS', valueFrom: { secretKeyRef: { name: 'gw-redis', key: 'url', optional: true } } },
    ]);
    expect(after.metadata?.annotations?.[ANN.status]).toBe('injected');
    // unknown fields survive
    expect((after.spec as Obj).restartPolicy).toBe('Always');
  });

  test("termination: the sidecar's preStop hook holds --drain-delay; the app's preStop sleeps 2 s longer", () => {
    const before = pod({ [ANN.inject]: 'true' });
    const after = applyPatch(before, injectSidecar(before, o).patch);
    expect(sidecarOf(after).lifecycle).toEqual({ preStop: { httpGet: { path: '/prestop', port: 15090 } } });
    expect(containers(after)[0]!.lifecycle).toEqual({ preStop: { sleep: { seconds: 7 } } });
    // an app with lifecycle hooks but no preStop gets the sleep beside them
    const hooked = PodSchema.parse({
      metadata: { annotations: { [ANN.inject]: 'true' } },
      spec: {
        containers: [
          {
            name: 'app',
            ports: [{ name: 'http', containerPort: 8080 }],
            lifecycle: { postStart: { exec: { command: ['true'] } } },
          },
        ],
      },
    });
    expect(containers(applyPatch(hooked, injectSidecar(hooked, o).patch))[0]!.lifecycle).toEqual({
      postStart: { exec: { command: ['true'] } },
      preStop: { sleep: { seconds: 7 } },
    });
    // an app's own preStop is left as it is; drainDelaySeconds 0: no hook anywhere
    const own = PodSchema.parse({
      metadata: { annotations: { [ANN.inject]: 'true' } },
      spec: {
        containers: [
          {
            name: 'app',
            ports: [{ name: 'http', containerPort: 8080 }],
            lifecycle: { preStop: { exec: { command: ['x'] } } },
          },
        ],
      },
    });
    expect(containers(applyPatch(own, injectSidecar(own, o).patch))[0]!.lifecycle).toEqual({
      preStop: { exec: { command: ['x'] } },
    });
    const none = applyPatch(before, injectSidecar(before, { ...o, drainDelaySeconds: 0 }).patch);
    expect(sidecarOf(none).lifecycle).toBeUndefined();
    expect(sidecarOf(none).args).not.toContain('--drain-delay');
    expect(containers(none)[0]!.lifecycle).toBeUndefined();
  });

  test('idempotent: a second admission of the injected pod adds nothing', () => {
    const before = pod({ [ANN.inject]: 'true' });
    const once = applyPatch(before, injectSidecar(before, o).patch);
    const again = injectSidecar(once, o);
    expect(again.outcome).toBe('already-injected');
    expect(again.patch).toEqual([]);
  });

  test('explicit gw.io/upstream-port without a named port: sidecar port gw-proxy and a warning', () => {
    const before = pod(
      { [ANN.inject]: 'true', [ANN.upstreamPort]: '3000', [ANN.listenPort]: '8080', [ANN.group]: 'g1' },
      [{ containerPort: 3000 }],
    );
    const r = injectSidecar(before, o);
    expect(r.outcome).toBe('injected');
    expect(r.warnings.join()).toMatch(/targetPort/);
    const s = sidecarOf(applyPatch(before, r.patch));
    expect(s.args).toEqual(expect.arrayContaining(['http://127.0.0.1:3000', '0.0.0.0:8080', 'g1']));
    expect((s.ports as Obj[])[0]).toEqual({ name: 'gw-proxy', containerPort: 8080, protocol: 'TCP' });
  });

  test.each([
    ['no port at all', { [ANN.inject]: 'true' }, [] as Obj[], /no container port named "http"/],
    [
      'bad upstream port',
      { [ANN.inject]: 'true', [ANN.upstreamPort]: 'eighty' },
      [{ name: 'http', containerPort: 80 }],
      /not a port number/,
    ],
    ['out of range', { [ANN.inject]: 'true', [ANN.upstreamPort]: '70000' }, [{ containerPort: 80 }], /out of range/],
    [
      'listen port clash',
      { [ANN.inject]: 'true' },
      [
        { name: 'http', containerPort: 8080 },
        { name: 'x', containerPort: 15080 },
      ],
      /listen port 15080 is already used/,
    ],
    [
      'metrics port = app port',
      { [ANN.inject]: 'true', [ANN.metricsPort]: '8080' },
      [{ name: 'http', containerPort: 8080 }],
      /metrics port 8080/,
    ],
  ])('refused (pod admitted unchanged, with a warning): %s', (_n, ann, ports, msg) => {
    const r = injectSidecar(pod(ann, ports), o);
    expect(r.outcome).toBe('refused');
    expect(r.patch).toEqual([]);
    expect(r.warnings.join()).toMatch(msg);
  });

  test('optional --config ConfigMap is mounted read-only', () => {
    const before = pod({ [ANN.inject]: 'true' });
    const after = applyPatch(before, injectSidecar(before, { ...o, configMapName: 'gw-sidecar-config' }).patch);
    expect((after.spec as Obj).volumes).toEqual([
      { name: 'gw-sidecar-config', configMap: { name: 'gw-sidecar-config', optional: true } },
    ]);
    expect(sidecarOf(after).args).toEqual(
      expect.arrayContaining(['--config', '/etc/gw/config.yaml', '--config-map', 'gw-sidecar-config']),
    );
  });

  test('a pod with automountServiceAccountToken: false: the sidecar alone gets a projected token (its config is read through the API), the app still none', () => {
    const base = pod({ [ANN.inject]: 'true' });
    const before = PodSchema.parse({ ...base, spec: { ...base.spec, automountServiceAccountToken: false } });
    const r = injectSidecar(before, { ...o, configMapName: 'gw-sidecar-config' });
    expect(r.outcome).toBe('injected');
    expect(r.warnings).toEqual([]);
    const after = applyPatch(before, r.patch);
    const volumes = (after.spec as Obj).volumes as Obj[];
    expect(volumes.map((v) => v.name)).toEqual(['gw-sidecar-config', 'gw-sidecar-token']);
    const sources = (volumes[1]!.projected as { sources: Obj[] }).sources;
    expect(sources.map((x) => Object.keys(x)[0])).toEqual(['serviceAccountToken', 'configMap', 'downwardAPI']);
    expect(sidecarOf(after).volumeMounts).toEqual([
      { name: 'gw-sidecar-config', mountPath: '/etc/gw', readOnly: true },
      { name: 'gw-sidecar-token', mountPath: '/var/run/secrets/kubernetes.io/serviceaccount', readOnly: true },
    ]);
    expect(containers(after)[0]!.volumeMounts).toBeUndefined();
    // a pod that mounts the token itself gets no second one
    const plain = applyPatch(base, injectSidecar(base, o).patch);
    expect((plain.spec as Obj).volumes).toBeUndefined();
    expect(sidecarOf(plain).volumeMounts).toBeUndefined();
  });

  test("a native sidecar's port (init container with restartPolicy Always) counts as used: a clash is refused with a warning", () => {
    const before = PodSchema.parse({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'app', annotations: { [ANN.inject]: 'true' } },
      spec: {
        initContainers: [
          { name: 'mesh', image: 'mesh:1', restartPolicy: 'Always', ports: [{ name: 'prom', containerPort: 15090 }] },
          { name: 'init', image: 'i:1', ports: [{ containerPort: 15080 }] },
        ],
        containers: [{ name: 'app', image: 'app:1', ports: [{ name: 'http', containerPort: 8080 }] }],
      },
    });
    const r = injectSidecar(before, o);
    expect(r.outcome).toBe('refused');
    expect(r.warnings.join()).toMatch(/metrics port 15090 is already used/);
  });

  test('the --config ConfigMap only in the namespaces that have it: elsewhere no --config (the sidecar would refuse the missing file and crash-loop)', () => {
    const before = pod({ [ANN.inject]: 'true' });
    const opts = { ...o, configMapName: 'gw-sidecar-config', configNamespaces: ['shop'] };
    const inShop = applyPatch(before, injectSidecar(before, opts, 'shop').patch);
    expect(sidecarOf(inShop).args).toEqual(expect.arrayContaining(['--config', '/etc/gw/config.yaml']));
    const elsewhere = applyPatch(before, injectSidecar(before, opts, 'other').patch);
    expect(sidecarOf(elsewhere).args).not.toContain('--config');
    expect(sidecarOf(elsewhere).volumeMounts).toBeUndefined();
    expect((elsewhere.spec as Obj).volumes).toBeUndefined();
  });

  test("the app's probes and lifecycle hooks naming the renamed port follow it to gw-upstream (left as http they could not resolve)", () => {
    const before = PodSchema.parse({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'app', annotations: { [ANN.inject]: 'true' } },
      spec: {
        containers: [
          {
            name: 'app',
            image: 'app:1',
            ports: [
              { name: 'http', containerPort: 8080 },
              { name: 'admin', containerPort: 9000 },
            ],
            readinessProbe: { httpGet: { path: '/', port: 'http' } },
            livenessProbe: { tcpSocket: { port: 'http' } },
            startupProbe: { httpGet: { path: '/', port: 'admin' } },
            lifecycle: {
              preStop: { httpGet: { path: '/stop', port: 'http' } },
              postStart: { exec: { command: ['true'] } },
            },
          },
        ],
      },
    });
    const after = applyPatch(before, injectSidecar(before, o).patch);
    const app = containers(after)[0]!;
    expect(app.readinessProbe).toEqual({ httpGet: { path: '/', port: UPSTREAM_PORT_NAME } });
    expect(app.livenessProbe).toEqual({ tcpSocket: { port: UPSTREAM_PORT_NAME } });
    expect(app.startupProbe).toEqual({ httpGet: { path: '/', port: 'admin' } }); // another port: untouched
    expect(app.lifecycle).toEqual({
      preStop: { httpGet: { path: '/stop', port: UPSTREAM_PORT_NAME } },
      postStart: { exec: { command: ['true'] } },
    });
  });
});

describe('TLS and h2c per pod (gw.io/tls-secret, gw.io/tls-client-ca, gw.io/tls-min-version, gw.io/h2c)', () => {
  const volumes = (p: Pod): Obj[] => ((p.spec as Obj).volumes ?? []) as Obj[];
  const mounts = (p: Pod): Obj[] => (sidecarOf(p).volumeMounts ?? []) as Obj[];
  const inject = (ann: Record<string, string>, opts = o): Pod => {
    const before = pod({ [ANN.inject]: 'true', ...ann });
    const r = injectSidecar(before, opts);
    expect([r.outcome, r.warnings]).toEqual(['injected', []]);
    return applyPatch(before, r.patch);
  };

  test('a named Secret is mounted read-only into the sidecar alone and its gateway listener serves TLS with it', () => {
    const after = inject({ [ANN.tlsSecret]: 'orders-tls' });
    expect(volumes(after)).toEqual([
      {
        name: TLS_VOLUME,
        secret: {
          secretName: 'orders-tls',
          items: [
            { key: 'tls.crt', path: 'tls.crt' },
            { key: 'tls.key', path: 'tls.key' },
          ],
        },
      },
    ]);
    expect(mounts(after)).toEqual([{ name: TLS_VOLUME, mountPath: TLS_MOUNT_PATH, readOnly: true }]);
    const args = sidecarOf(after).args as string[];
    expect(args.slice(args.indexOf('--tls-cert'))).toEqual([
      '--tls-cert',
      '/etc/gw-tls/tls.crt',
      '--tls-key',
      '/etc/gw-tls/tls.key',
    ]);
    expect(args).not.toContain('--tls-client-ca');
    expect(args).not.toContain('--h2c');
    // the app container sees neither the Secret nor a changed port
    expect(containers(after)[0]!.volumeMounts).toBeUndefined();
  });

  test('client certificates: ca.crt of the same Secret is mounted and named; a minimum version is passed on', () => {
    const after = inject({ [ANN.tlsSecret]: 'orders-tls', [ANN.tlsClientCa]: 'true', [ANN.tlsMinVersion]: 'TLSv1.3' });
    expect((volumes(after)[0]!.secret as { items: Obj[] }).items).toContainEqual({ key: 'ca.crt', path: 'ca.crt' });
    expect(sidecarOf(after).args).toEqual(
      expect.arrayContaining(['--tls-client-ca', '/etc/gw-tls/ca.crt', '--tls-min-version', 'TLSv1.3']),
    );
  });

  test('beside the --config ConfigMap: two volumes, the Secret outside /etc/gw (a mount inside a ConfigMap volume)', () => {
    const after = inject({ [ANN.tlsSecret]: 'orders-tls' }, { ...o, configMapName: 'gw-sidecar-config' });
    expect(volumes(after).map((v) => v.name)).toEqual(['gw-sidecar-config', TLS_VOLUME]);
    expect(mounts(after).map((m) => m.mountPath)).toEqual(['/etc/gw', '/etc/gw-tls']);
  });

  test("gw.io/h2c: true or false becomes the sidecar's --h2c; absent, the sidecar's config decides", () => {
    expect(sidecarOf(inject({ [ANN.h2c]: 'false' })).args).toEqual(expect.arrayContaining(['--h2c', 'false']));
    expect(sidecarOf(inject({ [ANN.h2c]: 'True' })).args).toEqual(expect.arrayContaining(['--h2c', 'true']));
    expect(sidecarOf(inject({})).args).not.toContain('--h2c');
  });

  test('the webhook\'s defaults (chart sidecar.tls, sidecar.h2c) apply to every pod; a pod\'s annotations win, "" turns TLS off', () => {
    const defaults = { ...o, tls: { secretName: 'shop-tls', clientCa: true }, h2c: false };
    const byDefault = inject({}, defaults);
    expect(volumes(byDefault)[0]).toMatchObject({ secret: { secretName: 'shop-tls' } });
    expect(sidecarOf(byDefault).args).toEqual(expect.arrayContaining(['--tls-client-ca', '--h2c', 'false']));
    const own = inject({ [ANN.tlsSecret]: 'own-tls', [ANN.tlsClientCa]: 'false', [ANN.h2c]: 'true' }, defaults);
    expect(volumes(own)[0]).toMatchObject({ secret: { secretName: 'own-tls' } });
    expect(sidecarOf(own).args).not.toContain('--tls-client-ca');
    expect(sidecarOf(own).args).toEqual(expect.arrayContaining(['--h2c', 'true']));
    const off = inject({ [ANN.tlsSecret]: '' }, defaults);
    expect(volumes(off)).toEqual([]);
    expect(sidecarOf(off).args).not.toContain('--tls-cert');
  });

  test.each([
    [{ [ANN.tlsSecret]: 'Orders_TLS' }, /gw\.io\/tls-secret: "Orders_TLS" is not a Secret name/],
    [{ [ANN.tlsSecret]: 'x'.repeat(254) }, /gw\.io\/tls-secret: .* is not a Secret name/],
    [{ [ANN.tlsSecret]: 't', [ANN.tlsClientCa]: 'yes' }, /gw\.io\/tls-client-ca: "yes" is not "true" or "false"/],
    [
      { [ANN.tlsSecret]: 't', [ANN.tlsMinVersion]: 'TLSv1.1' },
      /gw\.io\/tls-min-version: "TLSv1.1" is not TLSv1.2 or TLSv1.3/,
    ],
    [{ [ANN.h2c]: 'on' }, /gw\.io\/h2c: "on" is not "true" or "false"/],
    [{ [ANN.tlsClientCa]: 'true' }, /gw\.io\/tls-client-ca needs a TLS Secret \(gw\.io\/tls-secret\)/],
    [{ [ANN.tlsMinVersion]: 'TLSv1.3' }, /gw\.io\/tls-min-version needs a TLS Secret/],
  ])(
    'bad annotation %p → not injected, admitted with a warning naming it (never a plain listener where TLS was asked for)',
    (ann, msg) => {
      const r = injectSidecar(pod({ [ANN.inject]: 'true', ...ann }), o);
      expect(r.outcome).toBe('refused');
      expect(r.patch).toEqual([]);
      expect(r.warnings).toHaveLength(1);
      expect(r.warnings[0]).toMatch(/^gw sidecar not injected: /);
      expect(r.warnings[0]).toMatch(msg);
    },
  );
});

describe('review (AdmissionReview in, AdmissionReview out)', () => {
  const envelope = (object: unknown, kind = 'Pod') => ({
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: { uid: 'u-1', kind: { group: '', version: 'v1', kind }, namespace: 'ns', operation: 'CREATE', object },
  });

  test('annotated pod → allowed with a base64 JSON patch, uid echoed', () => {
    const r = review(envelope(pod({ [ANN.inject]: 'true' })), o);
    expect(r.status).toBe(200);
    if (!('response' in r.body)) throw new Error('no response');
    expect(r.body.response).toMatchObject({ uid: 'u-1', allowed: true, patchType: 'JSONPatch' });
    const patch = JSON.parse(Buffer.from(r.body.response.patch!, 'base64').toString()) as unknown[];
    expect(patch).toContainEqual(expect.objectContaining({ op: 'add', path: '/spec/containers/-' }));
  });

  test('unannotated pod, other kinds and UPDATEs → allowed, no patch', () => {
    const update = envelope(pod({ [ANN.inject]: 'true' }));
    update.request.operation = 'UPDATE';
    for (const body of [envelope(pod(undefined)), envelope({ metadata: {} }, 'ConfigMap'), update]) {
      const r = review(body, o);
      expect(r.body).toEqual({
        apiVersion: 'admission.k8s.io/v1',
        kind: 'AdmissionReview',
        response: { uid: 'u-1', allowed: true },
      });
    }
  });

  test('a pod the webhook cannot parse is still allowed, with a warning', () => {
    const r = review(envelope({ spec: { containers: [] } }), o);
    if (!('response' in r.body)) throw new Error('no response');
    expect(r.body.response.allowed).toBe(true);
    expect(r.body.response.patch).toBeUndefined();
    expect(r.body.response.warnings?.join()).toMatch(/spec\.containers/);
  });

  test('a malformed AdmissionReview → 400 naming the field', () => {
    expect(
      review({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', request: { kind: {} } }, o),
    ).toMatchObject({ status: 400, body: { error: expect.stringMatching(/request\.uid/) } });
    expect(review({ kind: 'AdmissionReview' }, o).status).toBe(400);
  });
});

describe('gw webhook flags', () => {
  const flags: WebhookFlags = {
    listen: '0.0.0.0:8443',
    tlsCert: 'c',
    tlsKey: 'k',
    image: 'gw:1',
    imagePullPolicy: 'IfNotPresent',
    sidecarListenPort: '15080',
    sidecarMetricsPort: '15090',
    redisSecret: 'gw-redis',
    sidecarCpuRequest: '50m',
    sidecarMemoryRequest: '128Mi',
    sidecarMemoryLimit: '512Mi',
    sidecarDrainDelay: '5',
    runAsUser: '10001',
  };
  test("the sidecar's heap flags follow its memory limit; --sidecar-node-options replaces them", () => {
    const env = (f: WebhookFlags): unknown =>
      (
        sidecarContainer(injectOptionsFromFlags(f), {
          upstreamPort: 8080,
          listenPort: 15080,
          metricsPort: 15090,
          group: 'g',
          portName: 'http',
          config: false,
        }).env as { name: string; value?: string }[]
      ).find((e) => e.name === 'NODE_OPTIONS')?.value;
    expect(env(flags)).toBe('--expose-gc --max-semi-space-size=8 --v8-pool-size=2 --max-old-space-size=307');
    expect(env({ ...flags, sidecarMemoryLimit: '1Gi' })).toBe(
      '--expose-gc --max-semi-space-size=8 --v8-pool-size=2 --max-old-space-size=614',
    );
    expect(env({ ...flags, sidecarMemoryLimit: '268435456' })).toBe(
      '--expose-gc --max-semi-space-size=8 --v8-pool-size=2 --max-old-space-size=153',
    );
    expect(env({ ...flags, sidecarNodeOptions: ' --max-old-space-size=100 ' })).toBe('--max-old-space-size=100');
  });
  test('defaults map to the inject options', () => {
    expect(injectOptionsFromFlags(flags)).toMatchObject({
      image: 'gw:1',
      listenPort: 15080,
      metricsPort: 15090,
      redisSecretName: 'gw-redis',
      runAsUser: 10001,
      drainDelaySeconds: 5,
    });
    expect(injectOptionsFromFlags({ ...flags, redisSecret: '' }).redisSecretName).toBeUndefined();
    expect(injectOptionsFromFlags(flags).tls).toBeUndefined();
    expect(injectOptionsFromFlags(flags).h2c).toBeUndefined();
    expect(
      injectOptionsFromFlags({
        ...flags,
        sidecarTlsSecret: 'shop-tls',
        sidecarTlsClientCa: 'true',
        sidecarH2c: 'false',
      }),
    ).toMatchObject({ tls: { secretName: 'shop-tls', clientCa: true }, h2c: false });
  });
  test.each([
    [{ sidecarListenPort: 'x' }, /--sidecar-listen-port: not a number/],
    [{ sidecarMetricsPort: '0' }, /--sidecar-metrics-port: out of range/],
    [{ imagePullPolicy: 'Sometimes' }, /--image-pull-policy/],
    [{ sidecarMemoryLimit: 'lots' }, /--sidecar-memory-limit: not a Kubernetes quantity/],
    [{ sidecarMetricsPort: '15080' }, /must differ/],
    [{ sidecarDrainDelay: '-1' }, /--sidecar-drain-delay: not a whole number/],
    [{ sidecarDrainDelay: '61' }, /--sidecar-drain-delay: at most 60/],
    [{ sidecarTlsSecret: 'Bad_Name' }, /--sidecar-tls-secret: not a Secret name/],
    [{ sidecarTlsSecret: 't', sidecarTlsClientCa: 'yes' }, /--sidecar-tls-client-ca: true or false/],
    [{ sidecarTlsSecret: 't', sidecarTlsMinVersion: 'TLSv1' }, /--sidecar-tls-min-version: TLSv1.2 or TLSv1.3/],
    [{ sidecarTlsClientCa: 'true' }, /need --sidecar-tls-secret/],
    [{ sidecarH2c: 'off' }, /--sidecar-h2c: true or false/],
  ])('bad flag %p → one-line error', (bad, msg) => {
    expect(() => injectOptionsFromFlags({ ...flags, ...bad })).toThrow(msg);
  });
});

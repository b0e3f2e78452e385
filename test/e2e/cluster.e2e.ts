/**
 * The cluster path for real (`make e2e`): the image `make image` built, `helm install` of ./helm/gw on the
 * one-node cluster of test/servers/cluster.sh (a kubelet, containerd, kube-proxy, CoreDNS), an application
 * Deployment whose pods get the sidecar from the webhook, and traffic through its Service from pods.
 * Runs inside the cluster's network namespace (`cluster.sh exec`), with node's test runner, in order:
 * each step builds on the one before. Figures (times, sidecar working set vs limit) are printed as
 * `e2e-figure:` lines (docs/testing.md).
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import {
  APP_NS,
  CHART,
  GW_NS,
  HELM,
  IMAGE,
  LOAD_NS,
  MB,
  SIDECAR_LIMIT,
  cgroupLimit,
  count,
  eventually,
  figure,
  helm,
  installRelease,
  kjson,
  kubectl,
  load,
  podRun,
  pods,
  ready,
  run,
  sleep,
  values,
  workingSet,
  KUBECTL,
  DRL,
  LOG,
} from './kube-tools.js';
import { APP, KEY_DRL, KEY_LOG, RESOURCES, SVC } from './fixtures.js';

describe('gw on a one-node cluster', { concurrency: false }, () => {
  before(async () => {
    for (const ns of [APP_NS, LOAD_NS]) await kubectl(['create', 'namespace', ns]);
    await kubectl(['label', 'namespace', APP_NS, 'gw.io/injection=enabled']);
  });
  after(async () => {
    // whatever a failed step left: the release and the namespaces (cluster.sh down removes the rest)
    await run(HELM, ['uninstall', 'gw', '-n', GW_NS, '--wait', '--timeout', '60s'], { timeoutMs: 90_000 });
  });

  test('helm install: controller (2, one leader), facade and webhook Ready; the bundled Redis by Service name', async () => {
    const t0 = Date.now();
    await installRelease(DRL);
    figure('helm install --wait', `${((Date.now() - t0) / 1000).toFixed(0)} s`);
    for (const c of ['controller', 'facade', 'webhook', 'redis']) {
      const ps = await pods(GW_NS, `app.kubernetes.io/component=${c}`);
      assert.equal(ps.filter(ready).length, c === 'redis' ? 1 : 2, `${c} pods Ready`);
    }
    const controllers = (await pods(GW_NS, 'app.kubernetes.io/component=controller')).map((p) => p.metadata.name);
    const leader = await eventually(60, 'a controller holds the lease', async () => {
      const leases = await kjson<{ items: { spec: { holderIdentity?: string } }[] }>(['get', 'leases', '-n', GW_NS]);
      return leases.items.map((l) => l.spec.holderIdentity ?? '').find((h) => controllers.some((c) => h.startsWith(c)));
    });
    figure('controller leader', leader);
    for (const crd of ['apidefinitions', 'policies', 'accesskeys', 'oauthclients']) {
      await kubectl(['get', 'crd', `${crd}.gw.io`]);
    }
    // Redis reached by its Service name from a pod (CoreDNS + kube-proxy), with the chart's password
    const secret = await kjson<{ data: Record<string, string> }>(['get', 'secret', '-n', GW_NS, 'gw-redis-password']);
    const pw = Buffer.from(secret.data.password!, 'base64').toString();
    const pong = await podRun(
      'redis-ping',
      'localhost/gw-test/redis:7',
      ['redis-cli', '-h', `gw-redis.${GW_NS}.svc.cluster.local`, 'ping'],
      { env: { REDISCLI_AUTH: pw }, timeoutSecs: 120 },
    );
    assert.match(pong, /PONG/);
  });

  test('ApiDefinition, Policy, AccessKey applied, then an injected 3-replica Deployment: every pod gets the sidecar and becomes Ready', async () => {
    // the resources first: a sidecar is Ready once its namespace's gw-config exists, which the controller
    // writes when the namespace has something to serve
    await kubectl(['apply', '-f', '-'], RESOURCES);
    const t0 = Date.now();
    await kubectl(['apply', '-f', '-'], APP);
    await kubectl(['-n', APP_NS, 'rollout', 'status', 'deployment/echo', '--timeout=240s'], undefined, 250_000);
    figure('echo Deployment (3 pods + sidecars) Ready', `${((Date.now() - t0) / 1000).toFixed(0)} s`);
    const ps = await pods(APP_NS, 'app=echo');
    assert.equal(ps.length, 3);
    for (const p of ps) {
      assert.deepEqual(p.spec.containers.map((c) => c.name).sort(), ['echo', 'gw-sidecar']);
      assert.ok(ready(p), `${p.metadata.name} Ready`);
      assert.equal(p.spec.containers.find((c) => c.name === 'gw-sidecar')!.image, IMAGE);
    }
  });

  test('the DRL limits across the 3 pods within 0.9–1.1 × rate', async () => {
    await eventually(60, 'the key answered by every pod', async () => {
      const r = await load(`${SVC}/echo/warm`, ['requests=1', `key=${KEY_LOG}`]);
      return count(r, 200) === 1 ? true : undefined;
    });
    // all three sidecars see each other in the DRL group before the limit is measured
    await eventually(30, 'three DRL peers', async () => {
      const ps = await pods(APP_NS, 'app=echo');
      const peers = await Promise.all(
        ps.map(async (p) => {
          const text = await (await fetch(`http://${p.status.podIP}:15090/metrics`)).text();
          return Number(/^gw_drl_peers (\S+)$/m.exec(text)?.[1]);
        }),
      );
      return peers.every((n) => n === 3) ? true : undefined;
    });
    // 60 per 60 s for the key; 90 requests on fresh connections, spread by kube-proxy over the pods
    const r = await load(`${SVC}/echo/drl`, ['requests=90', 'concurrency=3', 'fresh=1', `key=${KEY_DRL}`]);
    figure('DRL admitted of 90 (rate 60/60 s, 3 pods)', `${count(r, 200)} (pods ${JSON.stringify(r.pods)})`);
    assert.equal(r.errors, 0);
    assert.equal(count(r, 200) + count(r, 429), 90);
    assert.ok(count(r, 200) >= 54 && count(r, 200) <= 66, `admitted ${count(r, 200)} not within 54–66`);
    assert.ok(Object.keys(r.pods).length >= 2, `traffic reached several pods: ${JSON.stringify(r.pods)}`);
  });

  test('the sliding log (helm upgrade of config, pods rolled): exactly rate admitted across the 3 pods', async () => {
    await helm(['upgrade', 'gw', CHART, '-n', GW_NS, '-f', values(LOG), '--wait', '--timeout', '4m']);
    await kubectl(['-n', APP_NS, 'rollout', 'restart', 'deployment/echo']);
    await kubectl(['-n', APP_NS, 'rollout', 'status', 'deployment/echo', '--timeout=240s'], undefined, 250_000);
    await eventually(60, 'the old pods gone', async () =>
      (await pods(APP_NS, 'app=echo')).length === 3 ? true : undefined,
    );
    // a fresh window for the key: the warm-up request above spent one
    await sleep(1000);
    const r = await load(`${SVC}/echo/log`, ['requests=60', 'concurrency=3', 'fresh=1', `key=${KEY_LOG}`]);
    figure('sliding log admitted of 60 (rate 20/60 s)', `${count(r, 200)} (pods ${JSON.stringify(r.pods)})`);
    assert.equal(r.errors, 0);
    assert.ok(
      count(r, 200) === 20 || count(r, 200) === 19,
      `admitted ${count(r, 200)}, want 20 (19 if the warm-up is in the window)`,
    );
    assert.equal(count(r, 200) + count(r, 429), 60);
  });

  test('a key created by a Job with `gw keys create` against the facade Service is usable at once', async () => {
    const creds = await kjson<{ items: { metadata: { name: string }; data?: Record<string, string> }[] }>([
      'get',
      'secrets',
      '-n',
      GW_NS,
    ]);
    const cred = creds.items.find((s) => s.data?.secret && s.data?.access_tokens);
    assert.ok(cred, 'the credentials Secret');
    const secret = Buffer.from(cred.data!.secret!, 'base64').toString();
    await kubectl(['-n', LOAD_NS, 'create', 'secret', 'generic', 'gw-mgmt', `--from-literal=secret=${secret}`]);
    const body = JSON.stringify({
      rate: 100,
      per: 1,
      allowance: 100,
      quota_max: -1,
      access_rights: { echo: { api_id: 'echo', versions: ['Default'] } },
    });
    const job = `
apiVersion: batch/v1
kind: Job
metadata: {name: keys-create, namespace: ${LOAD_NS}}
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      automountServiceAccountToken: false
      containers:
        - name: gw
          image: ${IMAGE}
          imagePullPolicy: IfNotPresent
          args: [keys, create, --body, '${body}']
          env:
            - {name: GW_FACADE_URL, value: "http://gw-facade.${GW_NS}.svc:8081"}
            - {name: GW_SECRET, valueFrom: {secretKeyRef: {name: gw-mgmt, key: secret}}}
`;
    await kubectl(['apply', '-f', '-'], job);
    await kubectl(
      ['-n', LOAD_NS, 'wait', 'job/keys-create', '--for=condition=Complete', '--timeout=120s'],
      undefined,
      130_000,
    );
    const out = await kubectl(['-n', LOAD_NS, 'logs', 'job/keys-create']);
    const key = (JSON.parse(out.trim()) as { key?: string }).key;
    assert.ok(key, `gw keys create answered a key: ${out.length} bytes`);
    const r = await load(`${SVC}/echo/new-key`, ['requests=3', 'fresh=1', `key=${key}`]);
    assert.equal(count(r, 200), 3, JSON.stringify(r.statuses));
  });

  test('the sidecar: non-root, read-only root filesystem, cgroup memory limit; 60 s of load with no restart', async () => {
    const ps = await pods(APP_NS, 'app=echo');
    for (const p of ps) {
      const probe = await kubectl([
        '-n',
        APP_NS,
        'exec',
        p.metadata.name,
        '-c',
        'gw-sidecar',
        '--',
        'node',
        '-e',
        "let w='no';try{require('fs').writeFileSync('/x','x')}catch(e){w=e.code};console.log(JSON.stringify({uid:process.getuid(),write:w}))",
      ]);
      const got = JSON.parse(probe.trim()) as { uid: number; write: string };
      assert.notEqual(got.uid, 0, 'sidecar not root');
      assert.equal(got.write, 'EROFS', 'root filesystem read-only');
      assert.equal(cgroupLimit(p, 'gw-sidecar'), SIDECAR_LIMIT, 'the cgroup enforces the 256Mi limit');
    }
    const peak = new Map<string, number>();
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        for (const p of ps) {
          const ws = workingSet(p, 'gw-sidecar');
          if (ws !== undefined) peak.set(p.metadata.name, Math.max(peak.get(p.metadata.name) ?? 0, ws));
        }
        await sleep(1000);
      }
    })();
    const r = await load(`${SVC}/open/load`, ['duration=60', 'concurrency=32'], 240);
    sampling = false;
    await sampler;
    const total = Object.values(r.statuses).reduce((a, b) => a + b, 0);
    figure(
      '60 s load through the Service',
      `${total} requests, ${(total / (r.ms / 1000)).toFixed(0)} req/s, statuses ${JSON.stringify(r.statuses)}, errors ${r.errors}`,
    );
    for (const [pod, ws] of peak) figure(`peak working set ${pod} gw-sidecar`, `${MB(ws)} of ${MB(SIDECAR_LIMIT)}`);
    assert.equal(r.errors, 0);
    assert.equal(count(r, 200), total);
    assert.equal(peak.size, 3, 'working set sampled for every sidecar');
    const after = await pods(APP_NS, 'app=echo');
    for (const p of after) {
      for (const c of p.status.containerStatuses ?? []) {
        assert.equal(
          c.restartCount,
          0,
          `${p.metadata.name}/${c.name} restarted (${c.lastState?.terminated?.reason ?? ''})`,
        );
      }
    }
  });

  test('helm uninstall leaves no gw pod, webhook configuration or stuck finalizer; the app namespace deletes', async () => {
    const t0 = Date.now();
    await helm(['uninstall', 'gw', '-n', GW_NS, '--wait', '--timeout', '3m']);
    await eventually(120, 'no gw pod left', async () =>
      (await pods(GW_NS, 'app.kubernetes.io/name=gw')).length === 0 ? true : undefined,
    );
    const hooks = await kjson<{ items: { metadata: { name: string } }[] }>(['get', 'mutatingwebhookconfigurations']);
    assert.deepEqual(
      hooks.items.map((h) => h.metadata.name).filter((n) => n.startsWith('gw')),
      [],
    );
    await kubectl(['delete', 'namespace', APP_NS, LOAD_NS, '--wait=true', '--timeout=120s'], undefined, 130_000);
    const left = await run(KUBECTL, ['get', 'namespace', APP_NS]);
    assert.notEqual(left.code, 0, `namespace ${APP_NS} still there: ${left.stdout}`);
    figure('helm uninstall + namespace deletion', `${((Date.now() - t0) / 1000).toFixed(0)} s`);
  });
});

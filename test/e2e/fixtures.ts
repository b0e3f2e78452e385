/** The application and gw resources the end-to-end suites deploy (test/e2e/*.e2e.ts). */
import { APP_NS, ECHO } from './kube-tools.js';

export const APP = `
apiVersion: apps/v1
kind: Deployment
metadata: {name: echo, namespace: ${APP_NS}}
spec:
  replicas: 3
  selector: {matchLabels: {app: echo}}
  template:
    metadata:
      labels: {app: echo}
      annotations: {gw.io/inject: "true"}
    spec:
      # the app needs no API token; the injected sidecar mounts its own (docs/helm.md)
      automountServiceAccountToken: false
      securityContext: {runAsNonRoot: true, runAsUser: 10002, runAsGroup: 10002}
      containers:
        - name: echo
          image: ${ECHO}
          imagePullPolicy: IfNotPresent
          ports: [{name: http, containerPort: 8080}]
          readinessProbe: {httpGet: {path: /, port: http}, periodSeconds: 2}
          resources: {requests: {cpu: 20m, memory: 32Mi}, limits: {memory: 96Mi}}
          securityContext: {readOnlyRootFilesystem: true, allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}
---
apiVersion: v1
kind: Service
metadata: {name: echo, namespace: ${APP_NS}}
spec:
  selector: {app: echo}
  ports: [{name: http, port: 80, targetPort: http}]
`;

/** Access to the echo API, as an AccessKey's `access_rights`. */
const ECHO_RIGHTS = { echo: { api_id: 'echo', versions: ['Default'] } };

/**
 * An AccessKey `name` and the Secret `<name>-key` holding its `key`; `spec` the AccessKey's fields beside
 * its alias and secretRef (written as JSON, which YAML reads as it is).
 */
function keyFixture(name: string, key: string, spec: Record<string, unknown>): string {
  return `apiVersion: v1
kind: Secret
metadata: {name: ${name}-key, namespace: ${APP_NS}}
stringData: {key: ${key}}
---
apiVersion: gw.io/v1alpha1
kind: AccessKey
metadata: {name: ${name}, namespace: ${APP_NS}}
spec: ${JSON.stringify({ alias: name, secretRef: { name: `${name}-key`, key: 'key' }, ...spec })}`;
}

/** An ApiDefinition `name` (its api_id) at /<name>/ proxied to the app's port; `spec` any other fields. */
function apiFixture(name: string, spec: Record<string, unknown> = {}): string {
  const proxy = { listen_path: `/${name}/`, target_url: 'http://127.0.0.1:8080' };
  return `apiVersion: gw.io/v1alpha1
kind: ApiDefinition
metadata: {name: ${name}, namespace: ${APP_NS}}
spec: ${JSON.stringify({ name, api_id: name, ...spec, proxy })}`;
}

export const KEY_DRL = 'e2e-drl-key-0123456789abcdef';
export const KEY_LOG = 'e2e-log-key-0123456789abcdef';
export const RESOURCES = `
${apiFixture('echo')}
---
${apiFixture('open', { use_keyless: true })}
---
apiVersion: gw.io/v1alpha1
kind: Policy
metadata: {name: drl, namespace: ${APP_NS}}
spec:
  name: drl
  rate: 60
  per: 60
  access_rights: {echo: {api_id: echo, versions: [Default]}}
---
${keyFixture('drl', KEY_DRL, { apply_policies: ['drl'] })}
---
${keyFixture('log', KEY_LOG, { rate: 20, per: 60, allowance: 20, quota_max: -1, access_rights: ECHO_RIGHTS })}
`;

export const SVC = `http://echo.${APP_NS}.svc.cluster.local`;

/**
 * The day-2 suite's application (test/e2e/day2.e2e.ts): the echo Deployment of APP with a rolling update
 * that never goes below its replicas (`maxUnavailable: 0`).
 */
export const DAY2_APP = APP.replace(
  '  replicas: 3\n',
  '  replicas: 3\n  strategy: {type: RollingUpdate, rollingUpdate: {maxUnavailable: 0, maxSurge: 1}}\n',
);

/** A key limited to 50 requests per 5 s (the DRL's windows), with a large quota the `quotas` headers show. */
export const KEY_DAY2 = 'e2e-day2-key-0123456789abcdef';
export const DAY2_RATE = { rate: 50, per: 5, quota_max: 10_000_000 };
export const DAY2_RESOURCES = keyFixture('day2', KEY_DAY2, {
  rate: DAY2_RATE.rate,
  per: DAY2_RATE.per,
  allowance: DAY2_RATE.rate,
  quota_max: DAY2_RATE.quota_max,
  quota_renewal_rate: 86400,
  access_rights: ECHO_RIGHTS,
});

/** A key with the same quota, for reading the `X-RateLimit-*` headers without spending KEY_DAY2's allowance. */
export const KEY_HEADERS = 'e2e-day2-headers-0123456789abcdef';
export const DAY2_HEADERS_RESOURCES = keyFixture('day2-headers', KEY_HEADERS, {
  rate: 1000,
  per: 1,
  allowance: 1000,
  quota_max: DAY2_RATE.quota_max,
  quota_renewal_rate: 86400,
  access_rights: ECHO_RIGHTS,
});

/** An AccessKey (and its Secret) whose key is `key`: 100 requests per second on the echo API. */
export const accessKey = (name: string, key: string): string =>
  keyFixture(name, key, { rate: 100, per: 1, allowance: 100, quota_max: -1, access_rights: ECHO_RIGHTS });

/**
 * The gw case every benchmark measures: `gw standalone` with key auth (an AccessKey from a Secret) and a
 * DRL key limit that never refuses, in front of one upstream. Shared by run.ts and alloc.ts.
 */
import { writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { freePort } from '../harness/ports.js';
import { defaultInjectOptions } from '../../webhook/inject.js';
import { ENTRYPOINT_NODE_FLAGS, heapNodeOptions } from '../../webhook/node-options.js';

export const BENCH_KEY = 'bench-key-0123456789abcdef';
export const GW_CLI = resolve('dist/cli/gw.js');
/** The measured gw runs with the V8 flags the webhook gives a sidecar with the chart's default memory limit. */
export const GW_BENCH_ENV: NodeJS.ProcessEnv = {
  ...process.env,
  NODE_OPTIONS: heapNodeOptions(defaultInjectOptions.resources.limits.memory),
  GW_SECRET: 'bench',
  GW_ACCESS_TOKENS: 'bench',
  GW_LOG_LEVEL: 'warn',
};

/** node's own flags for the measured gw, as the image's ENTRYPOINT gives them */
export const GW_NODE_FLAGS: readonly string[] = ENTRYPOINT_NODE_FLAGS;

/**
 * node's arguments and environment for a baseline `script`: with the measured gw's V8 flags ('sidecar': its
 * NODE_OPTIONS and node's own flags), or V8's defaults (docs/benchmarks.md, "What the pairs compare").
 */
export function baselineNode(
  script: readonly string[],
  heap: 'sidecar' | 'defaults',
): { args: string[]; env: NodeJS.ProcessEnv } {
  return heap === 'sidecar'
    ? { args: [...GW_NODE_FLAGS, ...script], env: { ...process.env, NODE_OPTIONS: GW_BENCH_ENV.NODE_OPTIONS } }
    : { args: [...script], env: process.env };
}

export const BENCH_CLIENT = { id: 'bench-client', secret: 'bench-client-secret-0123456789abcdef' };

/**
 * The OAuth variant of the bench API: the same limits as the key (a DRL limit that never refuses, no
 * quota), carried by the policy of one OAuthClient; requests use a bearer token of that client.
 */
function oauthManifests(upstream: string): string {
  return `apiVersion: gw.io/v1alpha1
kind: ApiDefinition
metadata: {name: bench}
spec:
  use_oauth2: true
  oauth_meta: {allowed_access_types: [client_credentials]}
  proxy: {listen_path: /api/, target_url: '${upstream}'}
---
apiVersion: gw.io/v1alpha1
kind: Policy
metadata: {name: bench}
spec: {rate: 1000000000, per: 1, quota_max: -1}
---
apiVersion: v1
kind: Secret
metadata: {name: bench-client}
stringData: {secret: ${BENCH_CLIENT.secret}}
---
apiVersion: gw.io/v1alpha1
kind: OAuthClient
metadata: {name: bench}
spec: {api_id: bench, client_id: ${BENCH_CLIENT.id}, policy_id: bench, secretRef: {name: bench-client, key: secret}}
`;
}

/**
 * Writes the bench manifests into `dir` (key auth; `oauth`: the OAuth variant) and returns the
 * `gw standalone` arguments (free loopback ports).
 */
export async function gwStandaloneBench(dir: string, upstream: string, oauth = false): Promise<string[]> {
  writeFileSync(
    join(dir, 'bench.yaml'),
    oauth
      ? oauthManifests(upstream)
      : `apiVersion: gw.io/v1alpha1
kind: ApiDefinition
metadata: {name: bench}
spec:
  proxy: {listen_path: /api/, target_url: '${upstream}'}
---
apiVersion: v1
kind: Secret
metadata: {name: bench}
stringData: {key: ${BENCH_KEY}}
---
apiVersion: gw.io/v1alpha1
kind: AccessKey
metadata: {name: bench}
spec: {secretRef: {name: bench, key: key}, rate: 1000000000, per: 1, quota_max: -1}
`,
  );
  return [
    GW_CLI,
    'standalone',
    '--resources',
    dir,
    '--listen',
    `127.0.0.1:${await freePort()}`,
    '--admin-listen',
    `127.0.0.1:${await freePort()}`,
  ];
}

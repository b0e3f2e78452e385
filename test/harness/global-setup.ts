/**
 * jest globalSetup: one real redis-server and one real kube-apiserver + etcd (with the gw CRDs
 * installed and Established) per test run; Redis only for the tests run alone. Tests find them through
 * GW_TEST_* environment variables.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { startRedis, type RedisHandle } from './redis.js';
import { applyCrds, kubectlBin, startKube, type KubeHandle } from './kube.js';

declare global {
  var __GW_REDIS__: RedisHandle | undefined;
  var __GW_KUBE__: KubeHandle | undefined;
  var __GW_TMP__: string | undefined;
}

export default async function globalSetup(): Promise<void> {
  // Every temporary directory of the run (tests, the servers below, the gateways the tests spawn) is made
  // under one root: test workers and child processes inherit TMPDIR, and the teardown removes the root.
  const tmp = mkdtempSync(join(tmpdir(), 'gw-test-run-'));
  globalThis.__GW_TMP__ = tmp;
  process.env.TMPDIR = tmp;
  const redis = await startRedis();
  globalThis.__GW_REDIS__ = redis;
  process.env.GW_TEST_REDIS_URL = redis.url;
  console.log(`\n[gw-test] redis: ${redis.version.split(' ').slice(0, 3).join(' ')} on ${redis.url}`);

  // the tests run alone (GW_TEST_ALONE, jest.config.js) need no Kubernetes: nothing idles beside them
  if (process.env.GW_TEST_ALONE === '1') return;
  const kube = await startKube();
  globalThis.__GW_KUBE__ = kube;
  await applyCrds(kube, resolve('crds'));
  process.env.GW_TEST_KUBE_SERVER = kube.server;
  process.env.GW_TEST_KUBE_TOKEN = kube.token;
  process.env.GW_TEST_KUBE_LIMITED_TOKEN = kube.limitedToken;
  process.env.GW_TEST_KUBECONFIG = kube.kubeconfigPath;
  process.env.GW_TEST_KUBECTL = kubectlBin();
  console.log(
    `[gw-test] kube-apiserver ${kube.versions.kubeApiserver}, etcd ${kube.versions.etcd} on ${kube.server} (CRDs established)`,
  );
}

/**
 * jest globalSetup: one real redis-server and one real kube-apiserver + etcd (with the gw CRDs
 * installed and Established) per test run. Tests find them through GW_TEST_* environment variables.
 */
import { resolve } from 'node:path';
import { startRedis, type RedisHandle } from './redis.js';
import { applyCrds, kubectlBin, startKube, type KubeHandle } from './kube.js';

declare global {
  var __GW_REDIS__: RedisHandle | undefined;
  var __GW_KUBE__: KubeHandle | undefined;
}

export default async function globalSetup(): Promise<void> {
  const redis = await startRedis();
  globalThis.__GW_REDIS__ = redis;
  process.env.GW_TEST_REDIS_URL = redis.url;
  console.log(`\n[gw-test] redis: ${redis.version.split(' ').slice(0, 3).join(' ')} on ${redis.url}`);

  const kube = await startKube();
  globalThis.__GW_KUBE__ = kube;
  await applyCrds(kube, resolve('crds'));
  process.env.GW_TEST_KUBE_SERVER = kube.server;
  process.env.GW_TEST_KUBE_TOKEN = kube.token;
  process.env.GW_TEST_KUBE_LIMITED_TOKEN = kube.limitedToken;
  process.env.GW_TEST_KUBECONFIG = kube.kubeconfigPath;
  process.env.GW_TEST_KUBECTL = kubectlBin();
  console.log(`[gw-test] kube-apiserver ${kube.versions.kubeApiserver}, etcd ${kube.versions.etcd} on ${kube.server} (CRDs established)`);
}

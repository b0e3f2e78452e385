/**
 * `gw controller`, the process proper (run in a worker thread by cli/controller.ts): the operator. Watches the four kinds (one namespace or all), writes compiled config
 * ConfigMaps, sessions and OAuth client records in Redis, and status; with --leader-elect only the
 * holder of the Lease writes. /healthz, /readyz (caches synced, Redis reachable) and /metrics on
 * --metrics-listen. Hidden tuning flags (tests, operations): --resync-period, --lease-duration,
 * --identity, --concurrency, --store-check-period. --lease-namespace defaults to $POD_NAMESPACE (the chart sets it).
 */
import { createLogger } from '../lib/logger.js';
import { loadKubeConnection } from '../lib/kube/connection.js';
import { createOpsServer } from '../lib/ops-server.js';
import { drain, listen } from '../lib/serve.js';
import { closeStoreClient, storeClientFromFlag } from '../lib/store/redis.js';
import { Operator } from '../operator/operator.js';
import { onShutdown } from './shutdown.js';
import type { ControllerFlags } from './controller.js';

function seconds(value: string, flag: string, min = 0.1): number {
  const n = Number(value);
  if (!Number.isFinite(n) || n < min)
    throw new Error(`${flag}: expected a number of seconds ≥ ${min}, got ${JSON.stringify(value)}`);
  return Math.round(n * 1000);
}

/** `onStop` registers the shutdown trigger (signals in the main thread, a message in a worker). */
export async function runControllerProcess(
  flags: ControllerFlags,
  onStop: (drain: () => Promise<void>) => void = (d) => onShutdown(createLogger('controller'), d),
): Promise<void> {
  const logger = createLogger('controller');
  const conn = await loadKubeConnection(flags.kubeconfig);
  const resyncMs = seconds(flags.resyncPeriod, '--resync-period');
  const leaseDurationMs = seconds(flags.leaseDuration, '--lease-duration', 1);
  const storeCheckMs = seconds(flags.storeCheckPeriod, '--store-check-period');
  const concurrency = Number(flags.concurrency);
  if (!Number.isInteger(concurrency) || concurrency < 1)
    throw new Error(`--concurrency: expected a positive integer, got ${JSON.stringify(flags.concurrency)}`);
  const leaderElect = flags.leaderElect === true || flags.leaderElect === 'true' || flags.leaderElect === '1';
  const redis = flags.redis
    ? storeClientFromFlag(flags.redis, { maxRetriesPerRequest: 1, enableOfflineQueue: false }, logger)
    : undefined;
  redis?.on('error', () => undefined);
  if (!redis) logger.warn('no --redis: AccessKeys and OAuthClients stay Ready=False StoreUnavailable');

  const operator = new Operator({
    conn,
    logger,
    namespace: flags.namespace || undefined,
    redis,
    leaderElect,
    leaseNamespace: flags.leaseNamespace || process.env.POD_NAMESPACE || undefined,
    leaseDurationMs,
    identity: flags.identity,
    resyncMs,
    storeCheckMs,
    concurrency,
  });
  const ops = createOpsServer(operator.metrics.registry, () => operator.ready());
  // The stop is armed before anything can wait: a SIGTERM while the caches cannot sync (API server
  // unreachable) or Redis was never reached must still end the process (it used to be lost until then).
  let stopping = false;
  onStop(async () => {
    stopping = true;
    logger.info('shutting down');
    await operator.stop();
    await drain(ops);
    if (redis) await closeStoreClient(redis);
    // pino writes asynchronously and, in a worker thread, nothing flushes it at exit: out before exiting
    await new Promise<void>((resolve) => logger.flush(() => resolve()));
  });
  const opsAddr = await listen(ops, flags.metricsListen, '--metrics-listen');
  await operator.start();
  if (stopping) return;
  logger.info(
    {
      metrics: opsAddr,
      namespace: flags.namespace ?? '(all)',
      leaderElect,
      identity: operator.identity,
      resyncMs,
      leaseDurationMs,
    },
    'gw controller ready',
  );
}

/**
 * `gw controller`: the operator. Watches the four kinds (one namespace or all), writes compiled config
 * ConfigMaps, sessions and OAuth client records in Redis, and status; with --leader-elect only the
 * holder of the Lease writes. /healthz, /readyz (caches synced, Redis reachable) and /metrics on
 * --metrics-listen. Hidden tuning flags (tests, operations): --resync-period, --lease-duration,
 * --identity, --concurrency, --store-check-period. --lease-namespace defaults to $POD_NAMESPACE (the chart sets it).
 * Its V8 heap limits are node flags given where the process starts (the chart's NODE_OPTIONS, docs/helm.md).
 */
import { createLogger } from '../lib/logger.js';
import { loadKubeConnection } from '../lib/kube/connection.js';
import { createOpsServer } from '../lib/ops-server.js';
import { drain, listen } from '../lib/serve.js';
import { closeStoreClient, gatewayReconnectDelay, storeClientFromFlag } from '../lib/store/redis.js';
import { SHARD_BUDGET_BYTES } from '../controller/reconcile-config.js';
import { Operator } from '../controller/operator.js';
import { OperatorMetrics } from '../controller/metrics.js';
import { tracingFromEnv } from '../lib/trace/setup.js';
import { onShutdown } from './shutdown.js';

export interface ControllerFlags {
  kubeconfig?: string;
  namespace?: string;
  redis?: string;
  leaderElect?: boolean | string;
  metricsListen: string;
  resyncPeriod: string;
  leaseDuration: string;
  leaseNamespace?: string;
  identity?: string;
  concurrency: string;
  configShardBytes: string;
  storeCheckPeriod: string;
}

function seconds(value: string, flag: string, min = 0.1): number {
  const n = Number(value);
  if (!Number.isFinite(n) || n < min)
    throw new Error(`${flag}: expected a number of seconds ≥ ${min}, got ${JSON.stringify(value)}`);
  return Math.round(n * 1000);
}

export async function runController(flags: ControllerFlags): Promise<void> {
  const logger = createLogger('controller');
  const conn = await loadKubeConnection(flags.kubeconfig);
  const resyncMs = seconds(flags.resyncPeriod, '--resync-period');
  const leaseDurationMs = seconds(flags.leaseDuration, '--lease-duration', 1);
  const storeCheckMs = seconds(flags.storeCheckPeriod, '--store-check-period');
  const concurrency = Number(flags.concurrency);
  if (!Number.isInteger(concurrency) || concurrency < 1)
    throw new Error(`--concurrency: expected a positive integer, got ${JSON.stringify(flags.concurrency)}`);
  const shardBudget = Number(flags.configShardBytes);
  if (!Number.isInteger(shardBudget) || shardBudget < 10_000 || shardBudget > SHARD_BUDGET_BYTES)
    throw new Error(
      `--config-shard-bytes: expected an integer from 10000 to ${SHARD_BUDGET_BYTES}, got ${JSON.stringify(flags.configShardBytes)}`,
    );
  const leaderElect = flags.leaderElect === true || flags.leaderElect === 'true' || flags.leaderElect === '1';
  const redis = flags.redis
    ? storeClientFromFlag(
        flags.redis,
        // reconnecting as fast as the gateways do: a store that is back gets its sessions restored at once
        { maxRetriesPerRequest: 1, enableOfflineQueue: false, retryStrategy: gatewayReconnectDelay },
        logger,
      )
    : undefined;
  redis?.on('error', () => undefined);
  if (!redis) logger.warn('no --redis: AccessKeys and OAuthClients stay Ready=False StoreUnavailable');

  const metrics = new OperatorMetrics();
  const tracing = await tracingFromEnv(process.env, 'gw-controller', logger, () => metrics.traceExportFailures.inc());
  const operator = new Operator({
    metrics,
    tracing,
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
    shardBudget,
  });
  const ops = createOpsServer(operator.metrics.registry, () => operator.ready());
  // The stop is armed before anything can wait: a SIGTERM while the caches cannot sync (API server
  // unreachable) or Redis was never reached must still end the process.
  let stopping = false;
  onShutdown(logger, async () => {
    stopping = true;
    await operator.stop();
    await drain(ops);
    if (redis) await closeStoreClient(redis);
    await tracing?.shutdown().catch(() => undefined);
    // pino writes asynchronously: its last lines out before the process exits (a stdout that does not
    // drain gets a second; the exit's own flush is bounded too, lib/stdout-destination.ts)
    await new Promise<void>((resolve) => {
      setTimeout(resolve, 1000).unref();
      logger.flush(() => resolve());
    });
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

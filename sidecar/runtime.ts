/**
 * The gateway as one unit, shared by `gw sidecar` and `gw standalone`: DRL peers, the limiter engine
 * and the HTTP server, wired to metrics and logs.
 */
import { prepareRoutes } from './proxy/router.js';
import type { Server } from 'node:http';
import type { Redis, Cluster } from 'ioredis';
import { systemClock, type Clock } from '../lib/clock.js';
import type { Logger } from '../lib/logger.js';
import { ignoredAlgorithmFlags, selectedAlgorithm, type GatewayOptionsT } from '../lib/options.js';
import { lookupSession, type SessionStore } from '../contract/sessions.js';
import { throttledWarn } from '../lib/log-throttle.js';
import type { CompiledConfig } from '../contract/config.js';
import { createEngine, type GatewayEngine } from './engine/engine.js';
import type { CheckRequest } from './engine/types.js';
import { smoothingEventFields } from './engine/smoothing-report.js';
import { effectiveSession } from '../contract/limits/effective-session.js';
import { DrlPeers } from '../limiters/drl-peers.js';
import type { SmoothingEvent } from '../limiters/types.js';
import type { GatewayMetrics } from './metrics.js';
import type { StreamManager } from '../streams/manager.js';
import { createStreamsOnDemand } from '../streams/on-demand.js';
import { createGatewayServer } from './proxy/gateway-server.js';
import { createObserver } from './proxy/observe.js';
import { createAccessLog } from './proxy/access-log.js';
import { tracingFromOptions } from '../lib/trace/setup.js';
import type { ClientDirectory } from '../contract/oauth/clients.js';
import type { TokenStore } from '../contract/oauth/tokens.js';
import { OAuthServer } from '../stores/oauth/grants.js';
import { createOAuthEndpoints } from './oauth/endpoints.js';
import { createBearerLookup } from './oauth/bearer.js';
import { GuessLimiter } from './oauth/guess-limit.js';
import { ClientAddresses } from '../lib/ip/client-address.js';
import { connectionOf } from '../lib/http/connection.js';

export interface RuntimeDeps {
  options: GatewayOptionsT;
  config: () => CompiledConfig;
  sessions: SessionStore;
  redis?: Redis | Cluster;
  group?: string;
  metrics: GatewayMetrics;
  logger: Logger;
  clock?: Clock;
  upstreamOverride?: string;
  ready: () => boolean;
  /** What /healthz's body adds (the shared store's state). */
  health?: () => Record<string, unknown>;
  /** Smoothing events also go here (cluster: published for the controller to turn into Events). */
  onSmoothingEvent?: (e: SmoothingEvent & { api_id: string; policy?: string }) => void;
  /** Redis URL for redis_streams inputs (default: none). */
  redisUrl?: string;
  /** `service.name` of exported spans (default gw-sidecar). */
  serviceName?: string;
  /** OAuth (docs/contract.md#oauth-tokens): where tokens and clients live (standalone: memory; cluster: Redis). */
  oauth: { tokens: TokenStore; clients: ClientDirectory };
}

export interface GatewayRuntime {
  server: Server;
  /** The limiter engine in force. */
  readonly engine: GatewayEngine;
  /**
   * Gateway options changed while running: the limiter engine is rebuilt with them (limiter state in the
   * shared store carries over; in-process windows — the DRL's, memory limiters — start afresh).
   */
  setOptions(options: GatewayOptionsT): void;
  peers: DrlPeers;
  streams: StreamManager;
  /** Call on every config change: starts, reconfigures and stops streams. */
  applyConfig(config: CompiledConfig): Promise<void>;
  ready(): boolean;
  close(): Promise<void>;
}

export async function createGatewayRuntime(d: RuntimeDeps): Promise<GatewayRuntime> {
  const clock = d.clock ?? systemClock;
  const { metrics, logger } = d;
  const ignored = ignoredAlgorithmFlags(d.options);
  if (ignored.length) {
    const algorithm = selectedAlgorithm(d.options);
    logger.warn(
      { algorithm, ignored },
      `more than one limiter algorithm enabled: ${algorithm} is used, ${ignored.join(', ')} ignored`,
    );
  }
  const peers = new DrlPeers(d.redis, d.group ?? 'default', d.options.drl_notification_frequency, clock, () =>
    metrics.storeErrors.inc(),
  );
  peers.onChange((n) => {
    metrics.drlPeers.set(n);
    logger.info({ peers: n }, 'DRL peers changed');
  });
  metrics.drlPeers.set(1);
  await peers.start();
  const logStoreError = throttledWarn(logger, 'shared store error');
  const makeEngine = (options: GatewayOptionsT): GatewayEngine =>
    createEngine({
      options,
      clock,
      config: d.config,
      redis: d.redis,
      peers: () => peers.count(),
      storeDeadlineMs: options.kv_deadline_ms,
      onSmoothingEvent: (e) => {
        metrics.smoothingEvents.inc({ api: e.api_id, event: e.event });
        logger.info(smoothingEventFields(e), e.event);
        d.onSmoothingEvent?.(e);
      },
      onSmoothingUnsupported: (e) => {
        metrics.smoothingRefused.inc({ api: e.api_id });
        logger.warn({ api_id: e.api_id, limiter_key: e.limiterKey, algorithm: e.algorithm }, e.reason);
      },
      onSmoothingAllowance: (api, allowance) => metrics.smoothingAllowance.set({ api }, allowance),
      onStoreError: (e) => {
        metrics.storeErrors.inc();
        logStoreError(e);
      },
      onDrlFallback: (active, e) => {
        metrics.drlFallback.set(active ? 1 : 0);
        if (active) {
          metrics.drlFallbacks.inc();
          logger.warn(
            { peers: peers.count(), err: e?.message },
            'DRL: shared store unreachable, limits split evenly over the last known peers',
          );
        } else logger.info('DRL: shared store back, limits follow the shared leases again');
      },
      onClientBucketEvicted: () => metrics.clientBucketsEvicted.inc(),
      onStoreRepair: (bucket) =>
        logger.warn(
          { bucket },
          'shared store keys of a limiter bucket held another type: removed, the bucket starts afresh',
        ),
    });
  let engine = makeEngine(d.options);
  metrics.drlFallback.set(0);
  engine.limiters.drl.start(); // the DRL's sweep: expired leases given back, idle buckets forgotten
  // the gateway asks the engine in force: a live change of the gateway options swaps it (setOptions)
  const liveEngine = { check: (req: CheckRequest) => engine.check(req) };
  const tracing = await tracingFromOptions(d.options, d.serviceName ?? 'gw-sidecar', logger, () =>
    metrics.traceExportFailures.inc(),
  );
  const accessLog = d.options.access_logs.enabled
    ? createAccessLog(1, (n) => metrics.accessLogDropped.inc(n))
    : undefined;
  metrics.clientBucketCount = () => engine.clientBuckets();
  const clientAddresses = new ClientAddresses(d.options.trusted_proxies, d.options.ipv6_prefix);
  const streams = createStreamsOnDemand({ logger, redisUrl: d.redisUrl, clock });
  streams.metrics(metrics.registry);
  const oauthServer = new OAuthServer(d.oauth.tokens, d.oauth.clients, () => Math.floor(clock.now() / 1000));
  const oauth = {
    endpoints: createOAuthEndpoints({
      server: oauthServer,
      guesses: new GuessLimiter(undefined, () => clock.now()),
      metrics: {
        issued: (api, grant) => metrics.oauthTokensIssued.inc({ api, grant }),
        error: (api, error) => metrics.oauthErrors.inc({ api, error }),
      },
      logger,
    }),
    bearer: createBearerLookup(d.oauth.tokens, d.oauth.clients, clock),
  };
  const gateway = createGatewayServer({
    oauth,
    streams,
    config: d.config,
    lookupSession: (h) => lookupSession(d.sessions, h),
    accessRights: (stored, config) => {
      const eff = effectiveSession(stored, config);
      return eff instanceof Error ? eff : eff.access_rights;
    },
    engine: liveEngine,
    metrics,
    logger,
    clock,
    upstreamOverride: d.upstreamOverride,
    ready: d.ready,
    health: d.health,
    upstreamTimeoutMs: d.options.upstream_timeout * 1000,
    strictPaths: d.options.strict_paths,
    tls: d.options.tls,
    h2c: d.options.h2c,
    http2: d.options.http2,
    observer: createObserver({
      tracing,
      accessLog,
      clientIp: (req) => clientAddresses.text(connectionOf(req)?.remoteAddress, req.headers['x-forwarded-for']),
    }),
    clientAddresses,
  });
  return {
    server: gateway.server,
    get engine() {
      return engine;
    },
    setOptions(options) {
      const previous = engine;
      engine = makeEngine(options);
      engine.limiters.drl.start();
      void previous.limiters.drl.stop().catch(() => undefined); // its unspent leases go back to the counter
    },
    peers,
    streams,
    applyConfig: (config) => {
      metrics.configLoaded.set(config.apis.length); // gw_config_apis, for gw sidecar and gw standalone alike
      prepareRoutes(config.apis); // the routing trie made now, not by the first request
      return streams.apply(config.apis);
    },
    ready: d.ready,
    async close() {
      await streams.stop();
      await engine.limiters.drl.stop().catch(() => undefined); // unspent leases back to the counter
      await peers.stop();
      await gateway.close();
      accessLog?.flush();
      await tracing?.shutdown().catch(() => undefined);
    },
  };
}

/**
 * Runs a start-up step (binding a listener); when it fails, the runtime is closed first (its DRL
 * heartbeat withdrawn, so the group does not count a gateway that never served), then the error goes on.
 */
export async function startOrWithdraw<T>(runtime: { close(): Promise<void> }, step: () => Promise<T>): Promise<T> {
  try {
    return await step();
  } catch (e) {
    await runtime.close().catch(() => undefined);
    throw e;
  }
}

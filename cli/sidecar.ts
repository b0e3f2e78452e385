/**
 * `gw sidecar`: the reverse proxy in front of one pod's application. Config from the controller's
 * ConfigMap (watched), sessions and shared limiter state from Redis.
 */
import { createLogger } from '../lib/logger.js';
import { storeClientFromFlag, storeHealth, GATEWAY_STORE_OPTIONS } from '../lib/store/redis.js';
import {
  adminListenerLimits,
  gatewayListenerLimits,
  listenerOverrides,
  loadGatewayOptions,
  type ListenerFlags,
} from '../lib/options.js';
import { loadKubeConnection } from '../lib/kube/connection.js';
import { createKubeApi } from '../lib/kube/api.js';
import { MemorySessionStore } from '../stores/sessions-memory.js';
import { type SessionStore } from '../contract/sessions.js';
import { RedisSessionStore } from '../stores/sessions-redis.js';
import { markerComplete, storeKeys, storeMarkerKey } from '../contract/store-keys.js';
import { StoreLossDetector } from '../lib/store/store-loss.js';
import { createOpsServer, json } from '../lib/ops-server.js';
import { closeConnectionsFor, drain, listen } from '../lib/serve.js';
import { KubeConfigSource } from '../sidecar/config/kube-source.js';
import { watchOptionsConfigMap, watchOptionsFile } from '../sidecar/config/options-file.js';
import { GatewayMetrics } from '../sidecar/metrics.js';
import { createGatewayRuntime, startOrWithdraw } from '../sidecar/runtime.js';
import { smoothingEventFields } from '../sidecar/engine/smoothing-report.js';
import { SMOOTHING_CHANNEL, type SmoothingEventPayloadT } from '../lib/events.js';
import { onShutdown } from './shutdown.js';
import { releaseStartupMemory } from '../sidecar/heap-tuning.js';
import type { CompiledConfig } from '../contract/config.js';
import { MemoryClientDirectory, RedisClientDirectory } from '../stores/oauth/client-directories.js';
import { type ClientDirectory } from '../contract/oauth/clients.js';
import { MemoryTokenStore } from '../stores/oauth/tokens-memory.js';
import { type TokenStore } from '../contract/oauth/tokens.js';
import { RedisTokenStore } from '../stores/oauth/tokens-redis.js';
import { DEFAULT_STORE_DEADLINE_MS } from '../lib/store/store-calls.js';
const { readFileSync } = process.getBuiltinModule('node:fs');

export interface SidecarFlags extends ListenerFlags {
  upstream: string;
  listen: string;
  kubeconfig?: string;
  namespace: string;
  group: string;
  config?: string;
  /** the ConfigMap --config is mounted from: followed through the API instead of polling the file */
  configMap?: string;
  redis?: string;
  metricsListen: string;
  /** seconds the preStop hook's GET /prestop holds before answering (responses close their connections meanwhile) */
  drainDelay: string;
}

export async function runSidecar(flags: SidecarFlags): Promise<void> {
  const logger = createLogger('sidecar');
  // the listener flags (TLS, h2c) win over the file's, at start and on every live change of the file
  const overrides = listenerOverrides(flags);
  const options = overrides(loadGatewayOptions(flags.config));
  const drainDelay = Number(flags.drainDelay);
  if (!/^\d+$/.test(flags.drainDelay) || drainDelay > 60)
    throw new Error(`--drain-delay: ${JSON.stringify(flags.drainDelay)} is not a whole number of seconds from 0 to 60`);
  const drainDelayMs = drainDelay * 1000;
  let upstream: URL;
  try {
    upstream = new URL(flags.upstream);
  } catch {
    throw new Error(`--upstream: ${JSON.stringify(flags.upstream)} is not a URL`);
  }
  // h2c://: HTTP/2 with prior knowledge to the application (docs/proxy.md, "gRPC")
  if (upstream.protocol !== 'http:' && upstream.protocol !== 'https:' && upstream.protocol !== 'h2c:') {
    throw new Error(`--upstream: ${JSON.stringify(flags.upstream)} is not an http(s) URL`);
  }
  const kube = createKubeApi(await loadKubeConnection(flags.kubeconfig));
  const metrics = new GatewayMetrics();
  const redis = flags.redis
    ? storeClientFromFlag(
        flags.redis,
        { ...GATEWAY_STORE_OPTIONS, maxRetriesPerRequest: 1, enableOfflineQueue: false },
        logger,
      )
    : undefined;
  redis?.on('error', () => metrics.storeErrors.inc());
  if (redis) metrics.trackStore(redis);
  let sessions: SessionStore;
  let oauth: { tokens: TokenStore; clients: ClientDirectory } = {
    tokens: new MemoryTokenStore(),
    clients: new MemoryClientDirectory(),
  };
  const closeOAuth: (() => Promise<void>)[] = [];
  let loss: StoreLossDetector | undefined;
  if (redis) {
    // one detector of an emptied store (docs/contract.md#faults) for the token keeper and the sessions; it reads the
    // markers of the controllers that write this namespace's sessions: while one says the store is being
    // restored, a missing session is not taken for a deleted key
    loss = new StoreLossDetector(redis, logger, {
      epochKey: storeKeys.storeEpoch,
      markers: { keys: [storeMarkerKey(flags.namespace), storeMarkerKey(undefined)], complete: markerComplete },
    });
    loss.start();
    // OAuth tokens and clients (docs/contract.md#oauth-tokens): revocations and client changes reach this cache at once
    // keeps the records it issues or reads, written back if the store loses its data (docs/contract.md#faults)
    const tokens = new RedisTokenStore(redis, logger, 1000, DEFAULT_STORE_DEADLINE_MS, { loss });
    const clients = new RedisClientDirectory(redis, logger);
    await Promise.all([tokens.subscribe(), clients.subscribe()]).catch((e: unknown) =>
      logger.warn({ err: (e as Error).message }, 'OAuth notifications unavailable; caches expire after 1 s'),
    );
    oauth = { tokens, clients };
    closeOAuth.push(
      () => tokens.close(),
      () => clients.close(),
    );
    const rs = new RedisSessionStore(redis, logger, { loss });
    await rs
      .subscribe()
      .catch((e: unknown) =>
        logger.warn({ err: (e as Error).message }, 'session notifications unavailable; cache expires after 1 s'),
      );
    sessions = rs;
  } else {
    logger.warn('no --redis: keys cannot be looked up (keyless APIs only) and limits are local to this sidecar');
    sessions = new MemorySessionStore();
  }
  let onConfig: (c: CompiledConfig) => void = () => {};
  const source = new KubeConfigSource(
    kube,
    flags.namespace,
    logger,
    () => metrics.configErrors.inc(),
    (c) => {
      onConfig(c);
    },
  );
  await source.start();

  const runtime = await createGatewayRuntime({
    options,
    config: () => source.current(),
    sessions,
    redis,
    redisUrl: flags.redis,
    // a group is counted within the namespace whose config the sidecars enforce: sidecars of another
    // namespace with the same --group (e.g. the default one) share neither limits nor the DRL split
    group: `${flags.namespace}/${flags.group}`,
    metrics,
    logger,
    upstreamOverride: flags.upstream,
    onSmoothingEvent: (e) => {
      const payload: SmoothingEventPayloadT = {
        ...smoothingEventFields(e),
        namespace: flags.namespace,
        ...(e.policy !== undefined ? { policy: e.policy } : {}),
      };
      redis?.publish(SMOOTHING_CHANNEL, JSON.stringify(payload)).catch(() => metrics.storeErrors.inc());
    },
    // readiness is the config only: a store outage must not take every gateway out of its Service
    // (kv_failure_mode decides what limits do meanwhile); the store's state is in /healthz and gw_store_up
    ready: () => source.isLoaded(),
    health: () => storeHealth(redis),
    oauth,
  });
  onConfig = (c) => void runtime.applyConfig(c);
  // the --config file (the chart's gw-sidecar-config ConfigMap volume) is followed: live options apply
  // as soon as the ConfigMap changes (--config-map: its API watch) or within a poll of the file (2 s, after
  // the kubelet's refresh of the volume); the others are named in a warn line
  const follow = {
    initial: options,
    override: overrides,
    logger,
    apply: (next: typeof options) => runtime.setOptions(next),
    onRefused: () => metrics.configErrors.inc(),
  };
  const optionsWatch = flags.configMap
    ? watchOptionsConfigMap({
        ...follow,
        api: kube,
        namespace: flags.namespace,
        name: flags.configMap,
        initialText: flags.config ? readFileSync(flags.config, 'utf8') : undefined,
      })
    : flags.config
      ? watchOptionsFile({ ...follow, file: flags.config })
      : undefined;
  await runtime.applyConfig(source.current());
  // GET /prestop: the pod's preStop hook (the webhook sets it): the Service is taking this pod out of its
  // endpoints; for --drain-delay seconds every response closes its connection, so keep-alive clients move
  // to the pods that stay, then the hook answers and the kubelet's SIGTERM drains what is left
  const ops = createOpsServer(
    metrics.registry,
    { ready: runtime.ready, health: () => storeHealth(redis) },
    (req, res) => {
      if (req.url !== '/prestop' || req.method !== 'GET') return json(res, 404, { error: 'Not Found' });
      closeConnectionsFor(runtime.server, drainDelayMs);
      logger.info({ drainDelayMs }, 'preStop: closing connections after each response, then draining on SIGTERM');
      setTimeout(() => json(res, 200, { draining: true }), drainDelayMs).unref();
    },
  );
  releaseStartupMemory();
  // a start that fails here (an address in use) takes back its DRL heartbeat: the group must not count
  // a peer that never served
  const [gwAddr, opsAddr] = await startOrWithdraw(runtime, async () => [
    await listen(runtime.server, flags.listen, '--listen', gatewayListenerLimits(options)),
    await listen(ops, flags.metricsListen, '--metrics-listen', adminListenerLimits(options)),
  ]);
  onShutdown(logger, async () => {
    optionsWatch?.stop();
    source.stop();
    await Promise.all([drain(runtime.server), drain(ops)]);
    await runtime.close();
    loss?.stop();
    await sessions.close();
    for (const c of closeOAuth) await c();
    redis?.disconnect();
  });
  // announced only once SIGTERM drains: a supervisor may stop the process the moment it reads this
  // "listening": /readyz may still say 503 (no gw-config readable yet)
  const ready = runtime.ready();
  logger.info(
    { listen: gwAddr, metrics: opsAddr, namespace: flags.namespace, group: flags.group, ready },
    ready ? 'gw sidecar listening and ready' : 'gw sidecar listening; not ready until gw-config is read (/readyz)',
  );
}

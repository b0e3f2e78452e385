/**
 * `gw standalone`: the gateway, the facade and the resources in one process. Resources come from a
 * watched directory of manifests; sessions live in memory (or Redis with --redis).
 */
import { bounded } from '../lib/store/store-calls.js';
import { StoreLossDetector } from '../lib/store/store-loss.js';
import { storeKeys } from '../contract/store-keys.js';
import { errorBody } from '../lib/http/http-util.js';
import { createLogger } from '../lib/logger.js';
import { storeClientFromFlag, storeHealth, GATEWAY_STORE_OPTIONS } from '../lib/store/redis.js';
import {
  adminListenerLimits,
  gatewayListenerLimits,
  listenerOverrides,
  loadGatewayOptions,
  type ListenerFlags,
} from '../lib/options.js';
import { MemorySessionStore } from '../stores/sessions-memory.js';
import { RedisSessionStore } from '../stores/sessions-redis.js';
import { createOpsServer } from '../lib/ops-server.js';
import { drain, listen } from '../lib/serve.js';
import { DirSource } from '../standalone/dir-source.js';
import { StandaloneState } from '../standalone/state.js';
import { QuotaStatePersistence } from '../standalone/quota-state.js';
import { MemoryQuota } from '../limiters/quota.js';
import { DirBackend } from '../facade/backend-dir.js';
import { createFacadeServer } from '../facade/server.js';
import type { ResourceBackend } from '../facade/backend.js';
import { liveQuota } from '../facade/live-quota.js';
import { GatewayMetrics } from '../sidecar/metrics.js';
import { createGatewayRuntime, startOrWithdraw, type GatewayRuntime } from '../sidecar/runtime.js';
import { onShutdown } from './shutdown.js';
import { releaseStartupMemory } from '../sidecar/heap-tuning.js';
import { OAuthTokenPersistence } from '../standalone/oauth-state.js';
import { OAuthServer } from '../stores/oauth/grants.js';
const { randomBytes } = process.getBuiltinModule('node:crypto');

/** Present while the store holds standalone's sessions; gone after a FLUSHALL. */
const { statSync } = process.getBuiltinModule('node:fs');
const { join } = process.getBuiltinModule('node:path');

/** With the gateway listener's flags (`--tls-cert`…, `--h2c`), as `gw sidecar`'s. */
export interface StandaloneFlags extends ListenerFlags {
  resources: string;
  listen: string;
  adminListen: string;
  config?: string;
  redis?: string;
}

export async function runStandalone(flags: StandaloneFlags): Promise<void> {
  const logger = createLogger('standalone');
  // the listener flags take the place of the --config file's `tls` and `h2c` (docs/standalone.md)
  const { tlsCert, tlsKey, tlsClientCa, tlsMinVersion, h2c } = flags;
  const options = listenerOverrides({ tlsCert, tlsKey, tlsClientCa, tlsMinVersion, h2c })(
    loadGatewayOptions(flags.config),
  );
  if (!statSync(flags.resources, { throwIfNoEntry: false })?.isDirectory()) {
    throw new Error(`--resources: ${flags.resources} is not a directory`);
  }
  if (!options.secret) {
    options.secret = randomBytes(18).toString('base64url');
    process.stdout.write(`gw standalone: generated X-Gw-Authorization secret: ${options.secret}\n`);
  }
  if (!options.access_tokens?.length) {
    options.access_tokens = [randomBytes(18).toString('base64url')];
    process.stdout.write(`gw standalone: generated management bearer token: ${options.access_tokens[0]}\n`);
  }

  const metrics = new GatewayMetrics();
  const redis = flags.redis
    ? storeClientFromFlag(flags.redis, { ...GATEWAY_STORE_OPTIONS, maxRetriesPerRequest: 1 }, logger)
    : undefined;
  redis?.on('error', () => metrics.storeErrors.inc());
  if (redis) metrics.trackStore(redis);
  const holder: { runtime?: GatewayRuntime; state?: StandaloneState } = {};
  // the directory is the source of truth: a key of the directory is answered from its session in memory (as
  // standalone writes it to the store), with Redis down too; the store is read only for keys it lacks
  const sessions = redis
    ? new RedisSessionStore(redis, logger, { known: (h) => holder.state?.session(h), knownFirst: true })
    : new MemorySessionStore();
  const source = new DirSource(flags.resources, logger, (errs) => metrics.configErrors.inc(errs.length));
  // OAuth tokens in memory, persisted under DIR/.gw (docs/contract.md#oauth-tokens), with or without --redis
  const oauthTokens = new OAuthTokenPersistence(join(flags.resources, '.gw'), logger);
  oauthTokens.load();
  oauthTokens.start();
  const state = new StandaloneState(
    flags.resources,
    sessions,
    logger,
    async (hash, stored, annotations) => {
      if (annotations['gw.io/suppress-reset'] !== 'true') await holder.runtime?.engine.resetQuota(hash, stored);
    },
    async (removed) => {
      for (const c of removed) {
        const n = await oauthTokens.store.revokeClient(c.namespace, c.api_id, c.client_id);
        if (n > 0)
          logger.info(
            { api_id: c.api_id, client_id: c.client_id, tokens: n },
            'OAuth client gone: its tokens are revoked',
          );
      }
    },
  );
  holder.state = state;
  await source.load();
  // a directory that cannot be read at start-up leaves nothing loaded: not ready until a read succeeds
  let configLoaded = source.loaded();
  // awaited by the source: a facade write (source.changed) answers once its change is applied
  source.onChange(async (snapshot) => {
    const loaded = source.loaded();
    await state.apply(snapshot);
    await holder.runtime?.applyConfig(state.current());
    configLoaded ||= loaded;
  });
  // watching before the first apply: a Secret it generates (DIR/.gw/) is seen and applied
  source.start();
  // one detector of an emptied store (docs/contract.md#faults, lib/store/store-loss.ts): its epoch is learnt before the
  // start-up apply writes the sessions, so a store emptied after that is noticed by the next read (every
  // second, and on every reconnect). If the store cannot answer now, the first read learns it instead (the
  // start-up apply wrote everything already).
  const loss = redis ? new StoreLossDetector(redis, logger, { epochKey: storeKeys.storeEpoch }) : undefined;
  if (loss) await bounded(loss.check(), 1000).catch(() => undefined);
  await state.apply(source.current());
  // a store (re)connected may have lost its data (a restart without persistence), or missed writes made
  // while it was away: every session is written again from the directory, as the operator's full resync
  // does in a cluster
  redis?.on('ready', () => void state.resync(source.current()));
  // an emptied store (FLUSHALL, failover to an empty replica): every session written again (the gateway
  // itself serves the directory's keys meanwhile)
  loss?.subscribe(() => {
    logger.info('store emptied: every session written again');
    const t0 = performance.now();
    void state
      .resync(source.current())
      .then(() => logger.info({ ms: Math.round(performance.now() - t0) }, 'store restored'));
  });
  loss?.start();

  let ready = false;
  // /readyz (docs/contract.md#health-and-readiness): config loaded; never the store (its state is in /healthz and gw_store_up)
  const isReady = (): boolean => ready && configLoaded;
  const health = (): Record<string, unknown> => storeHealth(redis);
  const runtime = await createGatewayRuntime({
    options,
    serviceName: 'gw-standalone',
    config: () => state.current(),
    sessions,
    redis,
    redisUrl: flags.redis,
    metrics,
    logger,
    ready: isReady,
    health,
    oauth: { tokens: oauthTokens.store, clients: state.clients },
  });
  holder.runtime = runtime;
  const engine = runtime.engine;
  // without Redis the quota counters live in this process: kept across a restart in DIR/.gw
  const quotaState =
    engine.limiters.quota instanceof MemoryQuota
      ? new QuotaStatePersistence(join(flags.resources, '.gw'), engine.limiters.quota, logger)
      : undefined;
  quotaState?.load();
  quotaState?.start();
  await runtime.applyConfig(state.current());

  const dirBackend = new DirBackend({
    dir: flags.resources,
    snapshot: () => source.current(),
    keyIndex: (snapshot) => state.keysOf(snapshot),
    quota: liveQuota(sessions, engine),
    onWrite: (files) => source.changed(files),
    refresh: () => source.refresh(),
  });
  // Adding a key through the facade resets its quota unless suppress_reset=1 (docs/contract.md#quotas).
  const backend: ResourceBackend = Object.assign(Object.create(dirBackend) as ResourceBackend, {
    putKey: async (hash: string, record: Parameters<ResourceBackend['putKey']>[1]) => {
      await dirBackend.putKey(hash, record);
      if (!record.suppressReset) {
        // The key is saved (and served from the directory while the store is down); a reset the store
        // cannot take now happens when it is back (the resync writes the key as new, which resets it).
        try {
          await engine.resetQuota(hash, await sessions.get(hash));
        } catch (e) {
          logger.warn(
            { keyHash: hash.slice(0, 12), err: (e as Error).message },
            'quota reset deferred: the shared store is unavailable',
          );
        }
      }
    },
  });

  releaseStartupMemory();
  const gwAddr = await startOrWithdraw(runtime, () =>
    listen(runtime.server, flags.listen, '--listen', gatewayListenerLimits(options)),
  );
  const facade = createFacadeServer({
    backend,
    options,
    gatewayOrigins: [`http://${gwAddr}`],
    logger,
    ready: () => ready,
    oauth: { server: new OAuthServer(oauthTokens.store, state.clients), config: () => state.current() },
  });
  const admin = createOpsServer(
    metrics.registry,
    { ready: isReady, health },
    (req, res) => facade.emit('request', req, res),
    errorBody,
  );
  const adminAddr = await startOrWithdraw(runtime, () =>
    listen(admin, flags.adminListen, '--admin-listen', adminListenerLimits(options)),
  );
  ready = true;

  onShutdown(logger, async () => {
    ready = false;
    loss?.stop();
    source.stop();
    await Promise.all([drain(runtime.server), drain(admin)]);
    quotaState?.stop(); // after the drain: the last requests are counted
    await oauthTokens.stop();
    facade.close();
    await runtime.close();
    await sessions.close();
    redis?.disconnect();
  });
  // announced only once SIGTERM drains: a supervisor may stop the process the moment it reads this
  const scheme = options.tls ? 'https' : 'http';
  process.stdout.write(`gw standalone ready: gateway ${scheme}://${gwAddr} admin http://${adminAddr}\n`);
}

/** `gw facade`: the management endpoints over the custom resources of a cluster. */
import { errorBody } from '../lib/http/http-util.js';
import { Registry, collectDefaultMetrics } from 'prom-client';
import { registerBuildInfo } from '../lib/build-info-metric.js';
import { createFacadeServer } from '../facade/server.js';
import { KubeBackend } from '../facade/backend-kube.js';
import { loadKubeConnection } from '../lib/kube/connection.js';
import { createKubeApi, type KubeApi } from '../lib/kube/api.js';
import { GROUP, VERSION } from '../crds/kinds.js';
import { createLogger, type Logger } from '../lib/logger.js';
import { adminListenerLimits, loadGatewayOptions } from '../lib/options.js';
import { createOpsServer } from '../lib/ops-server.js';
import { drain, listen } from '../lib/serve.js';
import { onDrainNotice, onShutdown } from './shutdown.js';
import { liveQuota } from '../facade/live-quota.js';
import { systemClock } from '../lib/clock.js';
import { RedisSessionStore } from '../stores/sessions-redis.js';
import { RedisTokenStore } from '../stores/oauth/tokens-redis.js';
import { RedisClientDirectory } from '../stores/oauth/client-directories.js';
import { OAuthServer } from '../stores/oauth/grants.js';
import { storeClientFromFlag } from '../lib/store/redis.js';
import { KubeConfigSource } from '../sidecar/config/kube-source.js';
import { createEngine } from '../sidecar/engine/engine.js';

export interface FacadeFlags {
  kubeconfig?: string;
  namespace: string;
  listen: string;
  config?: string;
  redis?: string;
  /** Seconds a write waits for the controller to report it Ready before answering 504. */
  readyTimeout?: string;
}

/** Whether the API server answers: one GET of the gw.io API group now and every 5 s; changes logged. */
class ApiProbe {
  reachable = false;
  private probed = false;
  private timer?: NodeJS.Timeout;

  constructor(
    private readonly kube: KubeApi,
    private readonly logger: Logger,
  ) {}

  async start(): Promise<void> {
    await this.probe();
    this.timer = setInterval(() => void this.probe(), 5000);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  private async probe(): Promise<void> {
    let ok: boolean;
    let why = '';
    try {
      await this.kube.get(`/apis/${GROUP}/${VERSION}`);
      ok = true;
    } catch (e) {
      ok = false;
      why = (e as Error).message;
    }
    if (ok !== this.reachable || !this.probed) {
      this.probed = true;
      if (ok) this.logger.info('API server reachable: ready');
      else this.logger.warn({ err: why }, 'API server unreachable: not ready (every route needs it)');
    }
    this.reachable = ok;
  }
}

export async function runFacade(flags: FacadeFlags): Promise<void> {
  const logger = createLogger('facade');
  const options = loadGatewayOptions(flags.config);
  if (!options.secret) throw new Error('secret: required (config file `secret` or env GW_SECRET)');
  if (!options.access_tokens?.length)
    throw new Error('access_tokens: required (config file `access_tokens` or env GW_ACCESS_TOKENS)');
  const readyTimeoutMs = Number(flags.readyTimeout ?? '10') * 1000;
  if (!Number.isFinite(readyTimeoutMs) || readyTimeoutMs <= 0)
    throw new Error(
      `--ready-timeout: expected a positive number of seconds, got ${JSON.stringify(flags.readyTimeout)}`,
    );
  // the same checks as the controller's and the sidecar's (no kubeconfig outside a cluster, a missing
  // CA file, a bad server URL → exit 1 with one line), and the same client
  const conn = await loadKubeConnection(flags.kubeconfig);
  const probeApi = createKubeApi(conn, 5000);
  const api = createKubeApi(conn);
  // Live quota values (GET /gw/keys/{keyID}) need the shared store, where the controller writes the
  // sessions and the gateways count, and the namespace's compiled config (policies): read-only.
  const redis = flags.redis
    ? storeClientFromFlag(flags.redis, { maxRetriesPerRequest: 1, enableOfflineQueue: false }, logger)
    : undefined;
  redis?.on('error', (e: Error) => logger.warn({ err: e.message }, 'redis error (live quota values unavailable)'));
  const sessions = redis ? new RedisSessionStore(redis, logger) : undefined;
  const config = redis ? new KubeConfigSource(api, flags.namespace, logger) : undefined;
  if (config) await config.start();
  if (!redis) logger.warn('no --redis: GET /gw/keys/{keyID} answers the stored quota fields, not the live ones');
  const engine =
    redis && config ? createEngine({ options, clock: systemClock, config: () => config.current(), redis }) : undefined;
  const quota = sessions && engine ? liveQuota(sessions, engine) : undefined;
  const backend = new KubeBackend({
    api,
    namespace: flags.namespace,
    logger,
    readyTimeoutMs,
    ...(quota ? { quota } : {}),
  });
  if (!options.gateway_urls?.length)
    logger.warn(
      "no gateway_urls in --config: POST /api/proxy refuses every URL (the facade is not a gateway; list the gateways' origins)",
    );
  // OAuth codes and introspection: the tokens and client records the gateways read, in Redis
  const oauthTokens = redis ? new RedisTokenStore(redis, logger, 0) : undefined;
  const oauthClients = redis ? new RedisClientDirectory(redis, logger, 0) : undefined;
  const facade = createFacadeServer({
    backend,
    options,
    gatewayOrigins: options.gateway_urls ?? [],
    logger,
    namespace: flags.namespace,
    ...(oauthTokens && oauthClients && config
      ? { oauth: { server: new OAuthServer(oauthTokens, oauthClients), config: () => config.current() } }
      : {}),
  });
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  registerBuildInfo(registry);
  // ready while the API server (the facade's store: every route reads or writes custom resources)
  // answers; probed every 5 s. Redis only feeds live quota values: GET /gw/keys falls back to the stored
  // ones without it, so it does not make the facade unready.
  let started = false;
  const probe = new ApiProbe(probeApi, logger);
  const server = createOpsServer(
    registry,
    () => started && probe.reachable && !notice.isDraining(),
    (req, res) => facade.emit('request', req, res),
    errorBody,
  );
  // the preStop hook's notice (SIGUSR2), then SIGTERM's drain (docs/helm.md, "Termination")
  const notice = onDrainNotice(logger, [server]);
  const addr = await listen(server, flags.listen, '--listen', adminListenerLimits(options));
  await probe.start();
  started = true;
  onShutdown(logger, async () => {
    started = false;
    probe.stop();
    await drain(server);
    facade.close();
    config?.stop();
    await sessions?.close();
    redis?.disconnect();
  });
  // announced only once SIGTERM drains: a supervisor may stop the process the moment it reads this
  logger.info({ listen: addr }, 'gw facade ready');
}

/**
 * What every step of a request shares, made once per gateway: its dependencies, the upstream pools, the
 * metric writes, the client-address reader and the answer to anything unexpected. The steps themselves
 * (gateway-server.ts names them in order) are functions of their request's Exchange, which points here.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from '../../lib/logger.js';
import type { Clock } from '../../lib/clock.js';
import type { StoredSession } from '../../contract/sessions.js';
import type { AccessDefinitionT } from '../../crds/schemas/access-definition.js';
import type { CompiledConfig } from '../../contract/config.js';
import { ClientAddresses } from '../../lib/ip/client-address.js';
import type { Engine } from '../engine/types.js';
import type { MaybePromise } from '../../limiters/types.js';
import type { GatewayMetrics } from '../metrics.js';
import { keyedThrottledLog } from '../../lib/log-throttle.js';
import type { OAuthEndpoints } from '../oauth/endpoints.js';
import type { BearerLookup } from '../oauth/bearer.js';
import { answer } from './respond.js';
import { Upstreams, type Forwarding } from './upstream.js';
import { H2Upstreams } from './upstream-h2.js';
import { Tunnels, type UpgradeOptions } from './upgrade.js';
import type { Http2Limits, ListenerTls } from './protocols.js';
import type { RequestObserver } from './observe.js';
import { RequestMetrics } from './request-metrics.js';

export interface GatewayDeps {
  config(): CompiledConfig;
  /** The session of a key hash: synchronous when the store knows it without I/O. */
  lookupSession(keyHash: string): MaybePromise<StoredSession | undefined>;
  /** Effective access rights of a session (policies applied); an Error when its policies cannot be resolved. */
  accessRights(
    stored: StoredSession,
    config: CompiledConfig,
  ): Record<string, AccessDefinitionT> | null | undefined | Error;
  engine: Engine;
  metrics: GatewayMetrics;
  logger: Logger;
  clock: Clock;
  /** Sidecar --upstream: overrides every API's target_url. */
  upstreamOverride?: string;
  ready(): boolean;
  /** What /healthz's body adds (the shared store's state). */
  health?(): Record<string, unknown>;
  upstreamTimeoutMs?: number;
  /** strict_paths (docs/contract.md#gateway-configuration): 400 for path forms upstreams read differently (lib/request-path.ts). */
  strictPaths?: boolean;
  /** OAuth APIs (docs/contract.md#oauth-endpoints): the oauth/* endpoints and bearer token lookups. */
  oauth?: { endpoints: OAuthEndpoints; bearer: BearerLookup };
  /** Finds the client address of a `limit_by: ip` limit (trusted_proxies, ipv6_prefix); default: the TCP peer. */
  clientAddresses?: ClientAddresses;
  /** Streaming inputs served under an API's listen path (streams/); false = not a stream path. */
  streams?: { tryHandle(apiId: string, relPath: string, req: IncomingMessage, res: ServerResponse): boolean };
  /** Server spans and access logs (observe.ts); absent when both are off. */
  observer?: RequestObserver;
  /** TLS on the gateway listener (protocols.ts); absent: plain. */
  tls?: ListenerTls;
  /** HTTP/2 with prior knowledge on a plain listener; default true. */
  h2c?: boolean;
  /** HTTP/2 clients' bounds (protocols.ts); default: lib/options.ts's. */
  http2?: Http2Limits;
}

export class Gateway {
  readonly metrics: RequestMetrics;
  readonly observer: RequestObserver | undefined;
  readonly strictPaths: boolean;
  /** The client of a per-client API limit and of the OAuth guess limits (trusted_proxies). */
  readonly clients: ClientAddresses;
  readonly upstreams: Upstreams;
  readonly h2Upstreams: H2Upstreams;
  readonly tunnels = new Tunnels();
  readonly upgrades: UpgradeOptions;
  /** Upstream failures: a warn line a second at most per API (the metrics count each), with the cause. */
  readonly logUpstream: (e: { err: Error; f: Forwarding }) => void;

  constructor(readonly deps: GatewayDeps) {
    this.metrics = new RequestMetrics(deps.metrics);
    this.observer = deps.observer;
    this.strictPaths = deps.strictPaths === true;
    this.clients = deps.clientAddresses ?? new ClientAddresses([]);
    const apiOf = (f: Forwarding): string => (f as Forwarding & { api: { api_id: string } }).api.api_id;
    this.logUpstream = keyedThrottledLog<{ err: Error; f: Forwarding }>(
      1000,
      ({ f }) => apiOf(f),
      ({ err, f }, suppressed) => {
        const code = rootCode(err);
        deps.logger.warn(
          {
            api: apiOf(f),
            status: f.status,
            err: err.message,
            ...(typeof code === 'string' ? { code } : {}),
            ...(suppressed ? { suppressed } : {}),
          },
          'upstream call failed',
        );
      },
    );
    const timeoutMs = deps.upstreamTimeoutMs ?? 30_000;
    const onError = (err: Error, f: Forwarding): void => this.logUpstream({ err, f });
    this.upstreams = new Upstreams({ timeoutMs, onError });
    this.h2Upstreams = new H2Upstreams({ timeoutMs, onError });
    this.upgrades = { timeoutMs, tunnels: this.tunnels, onError };
  }

  /** Anything unexpected: logged, answered 500 (or the connection dropped once the answer has begun). */
  fail(res: ServerResponse, e: unknown, what = 'request failed', x?: { api: { api_id: string } }): void {
    this.deps.logger.error({ err: (e as Error)?.message ?? String(e), ...(x ? { api: x.api.api_id } : {}) }, what);
    if (x) this.metrics.request(x.api.api_id, 500);
    if (!res.headersSent) answer(res, 500, { error: 'Internal error' });
    else res.destroy();
  }
}

/**
 * The code of an error's first cause (node's TLS or socket code) rather than its wrapper's: a stream node:http2
 * cancels because its session failed (ERR_HTTP2_STREAM_CANCEL) has the session's error, the TLS one, as cause.
 */
export function rootCode(err: Error): string | undefined {
  let code: string | undefined;
  let e: unknown = err;
  for (let depth = 0; depth < 4 && e instanceof Error; depth++) {
    const c = (e as { code?: unknown }).code;
    if (typeof c === 'string') code = c;
    e = e.cause;
  }
  return code;
}

/** Gateway configuration file (--config, YAML). Option names follow docs/contract.md#gateway-configuration. */
import { parse } from 'yaml';
import { z } from 'zod';
import { firstLine, formatZodError } from './errors.js';
import { DEFAULT_LISTENER_LIMITS, type ListenerLimits } from './serve.js';
import { GATEWAY_KEEP_ALIVE_MS } from './tuning.js';
import { parseCidr } from './ip/address.js';
const { readFileSync } = process.getBuiltinModule('node:fs');

/** Defaults of the slow-client and connection bounds (docs/proxy.md, "Slow clients and connection caps"). */
export const DEFAULT_HEADERS_TIMEOUT_S = 60;
/** HTTP/2 streams open at once per gateway connection (nginx: 128; grpc-go clients open up to the server's SETTINGS). */
export const DEFAULT_H2_MAX_STREAMS = 100;
/** Seconds an HTTP/2 answer may stay blocked by a client that takes nothing (nginx's send_timeout: 60 s). */
export const DEFAULT_H2_SEND_TIMEOUT_S = 60;
/**
 * HTTP/2 connections of one client address at once: 16 × 100 streams, each an upstream call (~30 KB and a
 * socket), stay near 50 MB (docs/proxy.md, "Slow clients and connection caps").
 */
export const DEFAULT_H2_MAX_SESSIONS_PER_CLIENT = 16;
export const DEFAULT_H2_LIMITS = {
  max_concurrent_streams: DEFAULT_H2_MAX_STREAMS,
  max_sessions_per_client: DEFAULT_H2_MAX_SESSIONS_PER_CLIENT,
  send_timeout: DEFAULT_H2_SEND_TIMEOUT_S,
} as const;
export const DEFAULT_MAX_CONNECTIONS = 4096;
export const DEFAULT_MAX_CONNECTIONS_PER_CLIENT = 1024;

/** Default of kv_deadline_ms. */
export const DEFAULT_KV_DEADLINE_MS = 1000;

export const GatewayOptions = z.strictObject({
  // credentials arrive in HTTP headers, whose surrounding whitespace never reaches the comparison: a secret
  // read from a file with its trailing newline would never match, so whitespace around them is dropped
  secret: z.string().trim().min(1).optional(),
  access_tokens: z.array(z.string().trim().min(1)).optional(),
  gateway_urls: z.array(z.string().url()).optional(),
  enable_kv_rolling_limiter: z.boolean().default(false),
  enable_sentinel_rate_limiter: z.boolean().default(false),
  enable_non_transactional_rate_limiter: z.boolean().default(false),
  enable_fixed_window_rate_limiter: z.boolean().default(false),
  drl_threshold: z.number().min(0).default(5),
  drl_notification_frequency: z.number().positive().default(2),
  enable_rate_limit_smoothing: z.boolean().default(true),
  rate_limit_response_headers: z.enum(['rate_limits', 'quotas']).default('rate_limits'),
  hash_keys: z.boolean().default(true),
  kv_failure_mode: z.enum(['open', 'closed']).default('open'),
  /**
   * Deadline in ms of one shared-store call on the request path; over it kv_failure_mode decides. One
   * second: a store that answers is used (exact counts under load), a hung one is given up on
   * (docs/limiter-engine.md, "Store deadline").
   */
  kv_deadline_ms: z.number().positive().default(DEFAULT_KV_DEADLINE_MS),
  /** Upper bound of requests waiting in throttling at once (docs/contract.md#throttling). */
  max_throttled_requests: z.number().int().min(0).default(1000),
  /** Seconds the gateway waits for an upstream's response headers (and between body chunks): 504 after. */
  upstream_timeout: z.number().positive().default(30),
  /** Timeout of POST /api/proxy in seconds. */
  proxy_timeout: z.number().positive().default(30),
  /**
   * CIDR blocks (or addresses) of proxies whose X-Forwarded-For is believed when finding the client
   * address of a `limit_by: ip` limit (docs/contract.md#limit-by; lib/ip/client-address.ts).
   */
  trusted_proxies: z
    .array(
      z.string().superRefine((v, ctx) => {
        const c = parseCidr(v);
        if (typeof c === 'string') ctx.addIssue({ code: 'custom', message: c });
      }),
    )
    .default([]),
  /** IPv6 clients of a `limit_by: ip` limit share one allowance per network of this prefix length. */
  ipv6_prefix: z.number().int().min(1).max(128).default(64),
  /** Upper bound of per-client buckets (limit_by ip / header) kept in process; least recently used evicted. */
  max_client_buckets: z.number().int().min(1).default(100_000),
  /** Per-client-IP limit of the management facade itself (429 + Retry-After past it); default 100 per 1 s. */
  facade_rate_limit: z.strictObject({ rate: z.number().int().min(1), per: z.number().positive() }).optional(),
  /** Span export over OTLP/HTTP (docs/contract.md#observability); trace context is propagated whether it is on or not. */
  opentelemetry: z
    .strictObject({
      enabled: z.boolean().default(false),
      /** Collector base URL; spans go to `<endpoint>/v1/traces`. Default: OTEL_EXPORTER_OTLP_ENDPOINT, else http://localhost:4318. */
      endpoint: z
        .string()
        .url()
        .refine((u) => /^https?:\/\//i.test(u), 'must be an http:// or https:// URL')
        .optional(),
      sampling_ratio: z.number().min(0).max(1).default(1),
    })
    .prefault({}),
  /** One JSON line per gateway request on stdout (docs/contract.md#observability). */
  access_logs: z.strictObject({ enabled: z.boolean().default(false) }).prefault({}),
  /**
   * docs/contract.md#gateway-configuration: 400 for request paths upstreams read differently from the gateway (`;`, `\\`, `%2F`, `%5C`,
   * `%00`); endpoint rules then match in any case and HEAD as GET (docs/proxy.md, "Path forms").
   */
  strict_paths: z.boolean().default(false),
  /** Seconds a client has to send a request's head on every listener (docs/contract.md#hostile-input): 408 and close after. */
  headers_timeout: z.number().positive().default(DEFAULT_HEADERS_TIMEOUT_S),
  /** Open connections of the gateway listener at once; a new one past it is closed at once (docs/contract.md#hostile-input). */
  max_connections: z.number().int().min(1).default(DEFAULT_MAX_CONNECTIONS),
  /**
   * TLS on the gateway listener (docs/proxy.md, "TLS and HTTP/2"): certificate and key files (PEM), read
   * again when they change; with client_ca_file a client certificate is requested and, when sent, verified.
   */
  tls: z
    .strictObject({
      cert_file: z.string().min(1),
      key_file: z.string().min(1),
      client_ca_file: z.string().min(1).optional(),
      min_version: z.enum(['TLSv1.2', 'TLSv1.3']).default('TLSv1.2'),
    })
    .optional(),
  /** HTTP/2 with prior knowledge beside HTTP/1.1 on the plain gateway listener. */
  h2c: z.boolean().default(true),
  /**
   * HTTP/2 clients of the gateway listener (docs/proxy.md, "Slow clients and connection caps"): streams open
   * at once on one connection (past it a new stream is refused, REFUSED_STREAM), and the seconds a stream's
   * answer may stay unable to move (the client takes nothing) before the stream is reset.
   */
  http2: z
    .strictObject({
      max_concurrent_streams: z.number().int().min(1).max(2_147_483_647).default(DEFAULT_H2_MAX_STREAMS),
      max_sessions_per_client: z.number().int().min(1).default(DEFAULT_H2_MAX_SESSIONS_PER_CLIENT),
      send_timeout: z.number().positive().default(DEFAULT_H2_SEND_TIMEOUT_S),
    })
    .prefault({}),
  /** Open connections of one client address (an IPv6 /64) on the gateway listener; past it, closed at once. */
  max_connections_per_client: z.number().int().min(1).default(DEFAULT_MAX_CONNECTIONS_PER_CLIENT),
});
type ParsedOptions = z.infer<typeof GatewayOptions>;
/**
 * The gateway listener's TLS: the file's `tls`, or the listener flags' (listenerOverrides), which carry the
 * flags' names so that an error names what the user wrote (`--tls-cert`, not `tls.cert_file`).
 */
export type ListenerTlsT = NonNullable<ParsedOptions['tls']> & { names?: TlsOptionNames };
/** How the TLS files are named in errors: the options of the file (the default) or the flags. */
export interface TlsOptionNames {
  cert: string;
  key: string;
  ca: string;
}
export type GatewayOptionsT = Omit<ParsedOptions, 'tls'> & { tls?: ListenerTlsT };

export type Algorithm = 'drl' | 'sliding_log' | 'sentinel' | 'fixed_window';

/**
 * Algorithm flags that selectedAlgorithm() ignores: with the fixed window on, the sliding-log flags
 * (the sentinel variant with or without enable_kv_rolling_limiter is one algorithm, not a conflict).
 */
export function ignoredAlgorithmFlags(o: GatewayOptionsT): string[] {
  if (!o.enable_fixed_window_rate_limiter) return [];
  return (
    ['enable_sentinel_rate_limiter', 'enable_kv_rolling_limiter', 'enable_non_transactional_rate_limiter'] as const
  ).filter((f) => o[f]);
}

/** The one algorithm the gateway runs for store-backed limits (DRL may still take fast limits, docs/contract.md#algorithms). */
export function selectedAlgorithm(o: GatewayOptionsT): Algorithm {
  if (o.enable_fixed_window_rate_limiter) return 'fixed_window';
  if (o.enable_sentinel_rate_limiter) return 'sentinel';
  if (o.enable_kv_rolling_limiter || o.enable_non_transactional_rate_limiter) return 'sliding_log';
  return 'drl';
}

/** Reads and validates the config file, then applies GW_SECRET / GW_ACCESS_TOKENS when the file omits them. */
export function loadGatewayOptions(file: string | undefined, env: NodeJS.ProcessEnv = process.env): GatewayOptionsT {
  if (!file) return parseGatewayOptions(undefined, 'config', env);
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    throw new Error(`${file}: cannot read config file: ${(e as Error).message}`, { cause: e });
  }
  return parseGatewayOptions(text, file, env);
}

/**
 * Validates a config file's text (`source` names it in errors: a file, a ConfigMap key), then applies
 * GW_SECRET / GW_ACCESS_TOKENS when it omits them. No text: the defaults.
 */
export function parseGatewayOptions(
  text: string | undefined,
  source: string,
  env: NodeJS.ProcessEnv = process.env,
): GatewayOptionsT {
  let raw: unknown = {};
  if (text !== undefined) {
    try {
      raw = parse(text) ?? {};
    } catch (e) {
      throw new Error(`${source}: invalid YAML: ${firstLine((e as Error).message)}`, { cause: e });
    }
  }
  const parsed = GatewayOptions.safeParse(raw);
  if (!parsed.success) throw new Error(`${source}: ${formatZodError(parsed.error)}`);
  const o = parsed.data;
  if (!o.secret && env.GW_SECRET?.trim()) o.secret = env.GW_SECRET.trim();
  if (!o.access_tokens && env.GW_ACCESS_TOKENS) {
    o.access_tokens = env.GW_ACCESS_TOKENS.split(',')
      .map((s) => s.trim())
      .filter(Boolean);
  }
  return o;
}

/**
 * The gateway listener's bounds: heads within headers_timeout, no cap on a whole request (uploads stream),
 * the connection caps, its own idle keep-alive (lib/tuning.ts GATEWAY_KEEP_ALIVE_MS).
 */
export function gatewayListenerLimits(o: GatewayOptionsT): ListenerLimits {
  return {
    headersTimeoutMs: o.headers_timeout * 1000,
    requestTimeoutMs: 0,
    maxConnections: o.max_connections,
    maxConnectionsPerClient: o.max_connections_per_client,
    keepAliveTimeoutMs: GATEWAY_KEEP_ALIVE_MS,
  };
}

/**
 * A management or metrics listener (facade, standalone's admin, --metrics-listen): heads within 20 s (or
 * headers_timeout when shorter), a whole request within 60 s, the listener's default connection caps or
 * the gateway's (max_connections, max_connections_per_client) where those are lower: an operator who
 * tightens the caps tightens them on every listener of the process. Idle keep-alive: the listeners'
 * default (lib/tuning.ts ADMIN_KEEP_ALIVE_MS).
 */
export function adminListenerLimits(o?: GatewayOptionsT): ListenerLimits {
  const headersTimeoutMs = Math.min(20_000, (o?.headers_timeout ?? DEFAULT_HEADERS_TIMEOUT_S) * 1000);
  const d = DEFAULT_LISTENER_LIMITS;
  return {
    headersTimeoutMs,
    requestTimeoutMs: Math.max(60_000, headersTimeoutMs),
    maxConnections: Math.min(d.maxConnections, o?.max_connections ?? d.maxConnections),
    maxConnectionsPerClient: Math.min(
      d.maxConnectionsPerClient,
      o?.max_connections_per_client ?? d.maxConnectionsPerClient,
    ),
  };
}

/**
 * The gateway listener's TLS and h2c given per process by flags (`gw sidecar --tls-cert … --h2c …`: what the
 * injection webhook sets per pod from its annotations, docs/helm.md "TLS and h2c per pod"). Strings as
 * they come from the command line; validated here with the flag named.
 */
export interface ListenerFlags {
  tlsCert?: string;
  tlsKey?: string;
  tlsClientCa?: string;
  tlsMinVersion?: string;
  h2c?: string;
}

const ListenerFlagsSchema = z
  .object({
    tlsCert: z.string().min(1, '--tls-cert: empty').optional(),
    tlsKey: z.string().min(1, '--tls-key: empty').optional(),
    tlsClientCa: z.string().min(1, '--tls-client-ca: empty').optional(),
    tlsMinVersion: z.enum(['TLSv1.2', 'TLSv1.3'], { message: '--tls-min-version: TLSv1.2 or TLSv1.3' }).optional(),
    h2c: z.enum(['true', 'false'], { message: '--h2c: true or false' }).optional(),
  })
  .refine((f) => (f.tlsCert === undefined) === (f.tlsKey === undefined), {
    message: '--tls-cert and --tls-key go together',
  })
  .refine((f) => f.tlsCert !== undefined || (f.tlsClientCa === undefined && f.tlsMinVersion === undefined), {
    message: '--tls-client-ca and --tls-min-version need --tls-cert and --tls-key',
  });

/**
 * The options with the listener flags in place of the file's `tls` and `h2c` (a flag wins over the file;
 * no flag leaves the file's value). Returns a function so that every later version of the file (a live
 * change) gets the same overrides. Throws a one-line error naming the flag.
 */
export function listenerOverrides(flags: ListenerFlags): (o: GatewayOptionsT) => GatewayOptionsT {
  const r = ListenerFlagsSchema.safeParse(flags);
  if (!r.success) throw new Error(r.error.issues[0]?.message ?? 'bad listener flags');
  const f = r.data;
  const tls: ListenerTlsT | undefined =
    f.tlsCert !== undefined && f.tlsKey !== undefined
      ? {
          cert_file: f.tlsCert,
          key_file: f.tlsKey,
          ...(f.tlsClientCa !== undefined ? { client_ca_file: f.tlsClientCa } : {}),
          min_version: f.tlsMinVersion ?? ('TLSv1.2' as const),
          names: { cert: '--tls-cert', key: '--tls-key', ca: '--tls-client-ca' },
        }
      : undefined;
  const h2c = f.h2c === undefined ? undefined : f.h2c === 'true';
  if (tls === undefined && h2c === undefined) return (o) => o;
  return (o) => ({ ...o, ...(tls ? { tls } : {}), ...(h2c !== undefined ? { h2c } : {}) });
}

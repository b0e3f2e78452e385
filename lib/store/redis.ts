/**
 * The shared store's client: one ioredis client built from a URL.
 *   redis://[user:pass@]host:port[/db]          a single server (rediss:// for TLS)
 *   redis+sentinel://[:pass@]h1:p1,h2:p2/master[/db]   Redis Sentinel: the master named `master`
 *   redis+cluster://[:pass@]h1:p1,h2:p2          Redis Cluster (startup nodes)
 * Every limiter key of one check carries a `{...}` hash tag (keys.ts), so scripts and transactions
 * stay in one slot on a cluster.
 */
import type { Cluster, Redis, RedisOptions } from 'ioredis';
import { ioredis } from './ioredis.js';
import { bounded } from './store-calls.js';

export type StoreClient = Redis | Cluster;

export interface ParsedStoreUrl {
  kind: 'single' | 'sentinel' | 'cluster';
  url: string;
  hosts: { host: string; port: number }[];
  username?: string;
  password?: string;
  /** Sentinel: the master group name. */
  master?: string;
  db?: number;
  tls: boolean;
}

function hostList(s: string, defaultPort: number): { host: string; port: number }[] {
  return s
    .split(',')
    .filter(Boolean)
    .map((hp) => {
      // host, host:port, or an IPv6 address in brackets ([::1], [::1]:6379)
      const m = /^(?:\[([^\]]+)\]|([^:[\]]+))(?::(\d+))?$/.exec(hp.trim());
      if (!m || Number(m[3] ?? 0) > 65535) throw new Error(`bad host "${hp}" in store URL: expected HOST[:PORT]`);
      return { host: (m[1] ?? m[2])!, port: m[3] ? Number(m[3]) : defaultPort };
    });
}

export function parseStoreUrl(url: string): ParsedStoreUrl {
  const m = /^([a-z+]+):\/\/(?:([^@/]*)@)?([^/?#]+)(\/[^?#]*)?/i.exec(url);
  if (!m)
    throw new Error(`bad store URL "${url}": expected redis://, rediss://, redis+sentinel:// or redis+cluster://`);
  const scheme = m[1]!.toLowerCase();
  let username: string | undefined;
  let password: string | undefined;
  if (m[2]) {
    const [u, ...p] = m[2].split(':');
    username = u ? decodeURIComponent(u) : undefined;
    password = p.length ? decodeURIComponent(p.join(':')) : undefined;
  }
  const segments = (m[4] ?? '').split('/').filter(Boolean);
  const dbOf = (s: string | undefined): number | undefined => {
    if (s === undefined) return undefined;
    if (!/^\d+$/.test(s)) throw new Error(`bad database "${s}" in store URL`);
    return Number(s);
  };
  switch (scheme) {
    case 'redis':
    case 'rediss':
      return {
        kind: 'single',
        url,
        hosts: hostList(m[3]!, 6379),
        username,
        password,
        db: dbOf(segments[0]),
        tls: scheme === 'rediss',
      };
    case 'redis+sentinel':
    case 'rediss+sentinel':
      if (!segments[0])
        throw new Error(`store URL "${url}" names no master: redis+sentinel://host:port,.../mastername`);
      return {
        kind: 'sentinel',
        url,
        hosts: hostList(m[3]!, 26379),
        username,
        password,
        master: decodeURIComponent(segments[0]),
        db: dbOf(segments[1]),
        tls: scheme.startsWith('rediss'),
      };
    case 'redis+cluster':
    case 'rediss+cluster':
      return {
        kind: 'cluster',
        url,
        hosts: hostList(m[3]!, 6379),
        username,
        password,
        tls: scheme.startsWith('rediss'),
      };
    default:
      throw new Error(`bad store URL scheme "${scheme}": expected redis, rediss, redis+sentinel or redis+cluster`);
  }
}

/**
 * The store client of a gateway (`gw sidecar`, `gw standalone`): auto-pipelining off, because under proxy
 * load its per-tick batches keep commands and replies alive across young-generation GCs and cost more CPU
 * per request than writing each command at once (docs/benchmarks.md, "The Redis sliding log on the request path"). Each request's
 * limiter check is still one EVALSHA.
 */
export const GATEWAY_STORE_OPTIONS: RedisOptions = {
  enableAutoPipelining: false,
  retryStrategy: gatewayReconnectDelay,
};

/**
 * Reconnect delay of a gateway's store client: ioredis's own backoff (50 ms more per attempt) capped at
 * 500 ms instead of its 2 s. Every limit that needs the store follows kv_failure_mode while it is away, so
 * a store that is back should be seen within half a second; an attempt against a store that is down is
 * one refused connection.
 */
export function gatewayReconnectDelay(attempt: number): number {
  return Math.min(attempt * 50, 500);
}

/**
 * How long one connection attempt to the store may take before it is dropped and retried. A SYN sent while
 * a Service still routes to a Redis pod that is gone gets no answer at all; with ioredis's own 10 s every
 * client that tried then (the controller's, so the sessions' restore, and the gateways', so their limits)
 * waited that long after the new Redis was reachable (measured on the one-node cluster: the sessions back
 * 9 s after Redis answered; docs/operator.md, "Day 2 on a real cluster").
 */
export const STORE_CONNECT_TIMEOUT_MS = 2000;

/**
 * createStoreClient for a URL given with `--redis`: a bad URL is an error naming the flag. A database
 * index the server does not have (`/99` on a default Redis of 16) makes ioredis report an error and go on
 * in database 0, sharing it with whatever else uses it: gw closes the client instead (the store stays
 * unreachable: `/readyz` 503, `kv_failure_mode` applies) and says why.
 */
export function storeClientFromFlag(
  url: string,
  opts: RedisOptions,
  logger: { error(o: object, msg: string): void },
): StoreClient {
  let client: StoreClient;
  try {
    client = createStoreClient(url, opts);
  } catch (e) {
    throw new Error(`--redis: ${(e as Error).message}`, { cause: e });
  }
  client.on('error', (e: Error) => {
    if (!/DB index is out of range/i.test(e.message)) return;
    logger.error(
      { err: e.message },
      '--redis: the server has no such database; not using the store (it would write into database 0)',
    );
    client.disconnect();
  });
  return client;
}

/**
 * Builds the client (auto-pipelining on unless `enableAutoPipelining: false`). `opts` are passed to every
 * connection (for instance maxRetriesPerRequest, enableOfflineQueue: false so an unreachable store fails
 * fast and kv_failure_mode applies).
 */
export function createStoreClient(url: string, opts: RedisOptions = {}): StoreClient {
  // auto-pipelining: commands issued in the same tick by concurrent requests leave in one write, so
  // each check stays one round trip while many checks share the syscalls
  const options: RedisOptions = { enableAutoPipelining: true, connectTimeout: STORE_CONNECT_TIMEOUT_MS, ...opts };
  const p = parseStoreUrl(url);
  const auth = { ...(p.username ? { username: p.username } : {}), ...(p.password ? { password: p.password } : {}) };
  const tls = p.tls ? { tls: {} } : {};
  const { Redis, Cluster } = ioredis();
  if (p.kind === 'single') return new Redis(url, options);
  if (p.kind === 'sentinel') {
    return new Redis({
      ...options,
      ...auth,
      ...tls,
      sentinels: p.hosts,
      name: p.master,
      ...(p.password ? { sentinelPassword: p.password } : {}),
      ...(p.db !== undefined ? { db: p.db } : {}),
    });
  }
  return new Cluster(p.hosts, {
    redisOptions: { ...options, ...auth, ...tls },
    enableOfflineQueue: options.enableOfflineQueue ?? true,
    enableAutoPipelining: options.enableAutoPipelining,
  });
}

/**
 * Coalesces this event-loop turn's commands into one socket write: the first call of a turn corks the
 * client's socket and a setImmediate uncorks it once the turn's I/O callbacks have run, so the limiter
 * checks of every request that arrived in the same turn leave in one writev. (What auto-pipelining
 * is for, without its per-batch bookkeeping: see GATEWAY_STORE_OPTIONS.) A Cluster client writes
 * to one socket per node and is left alone.
 */
export function coalesceWrites(client: StoreClient): void {
  if (client.isCluster) return;
  const s = (client as Redis).stream;
  if (s === undefined || corked.has(s) || !s.writable) return;
  corked.add(s);
  s.cork();
  setImmediate(uncork, s);
}
const corked = new WeakSet<object>();
function uncork(s: Redis['stream']): void {
  corked.delete(s);
  s.uncork();
}

/**
 * Closes a client at shutdown without waiting on a store that is not there: QUIT when connected (pending
 * replies arrive first), bounded by `ms`; a client that never connected (or lost its connection) is
 * disconnected at once — its QUIT would sit in the offline queue until Redis came back.
 */
export async function closeStoreClient(client: StoreClient, ms = 1000): Promise<void> {
  if (client.status !== 'ready') {
    client.disconnect();
    return;
  }
  await bounded(client.quit(), ms).catch(() => undefined);
  client.disconnect();
}

/**
 * The shared store's state for `/healthz`'s body: `up` (connected and ready), `down` (anything else:
 * connecting, reconnecting, closed). A gateway's readiness never depends on it (docs/contract.md#health-and-readiness).
 */
export function storeHealth(client: { status: string } | undefined): { store: 'up' | 'down' | 'none' } {
  return { store: client === undefined ? 'none' : client.status === 'ready' ? 'up' : 'down' };
}

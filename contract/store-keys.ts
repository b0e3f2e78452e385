/**
 * Redis key layout of the limiters. Every key of one check shares the hash tag `{bucket}`, so a
 * script or transaction touching several of them never hits CROSSSLOT on Redis Cluster.
 *   gw:{<bucket>}:log        sorted set: sliding window log (score = ms, member = ms.proc.seq in base 36)
 *   gw:{<bucket>}:sm         hash: smoothing state (a = allowance, t = ms of last event)
 *   gw:{<bucket>}:sentinel   string: ms until which the sentinel refuses
 *   gw:{<bucket>}:unlogged   sorted set: requests the sentinel refused without a log write, kept only for
 *                            a smoothed limit (smoothing's measured rate counts them; score = ms)
 *   gw:{<bucket>}:spare      hash: the sentinel's spare leases, gateway id → 'cap:until:demand:prevCap:prevUntil'
 *                            (limiters/sentinel.ts; expires with its longest lease)
 *   gw:{<bucket>}:fw:<n>     counter of the fixed window n = floor(now / per)
 *   gw:{<bucket>}:quota      hash: used, renews (ms, 0 = never)
 *   gw:{<bucket>}:drl        hash: DRL leases, slot index (floor(ms / slot)) → tokens granted in that slot
 *   gw:drl:{<group>}:peers   sorted set: DRL heartbeats (score = ms, member = peer id)
 * OAuth (docs/contract.md#oauth-tokens; values hold hashes and ids, never a raw token, code or secret; every key expires):
 *   gw:oauth:tok:{<sha256>}        string: JSON token record (access or refresh), expiring at its exp
 *   gw:oauth:code:{<sha256>}       string: JSON authorization code record, 60 s
 *   gw:oauth:code-used:{<sha256>}  string: the family a redeemed code gave (a second redemption revokes it)
 *   gw:oauth:rt-used:{<sha256>}    string: the family of a used (rotated) refresh token (SET NX: a replay finds it)
 *   gw:oauth:fam:{<family>}        set: the token hashes of one authorization grant
 *   gw:oauth:revoked:{<sha256>}    string: a revoked token (until its exp): a gateway never writes it back
 *   gw:oauth:ctok:<kind>:{<sha256(ns, api, client_id)>}  sorted set: a client's live tokens of one kind
 *                                  (access / refresh; score = expiry in s, ms precision; member = token hash),
 *                                  the bound of docs/oauth.md "Tokens per client"; expires with its last token
 *   gw:oauth:client:<ns>/<api>/<client_id>  string: the client record the controller writes (contract/oauth/clients.ts)
 * Store loss:
 *   gw:store:epoch                 string: a random id the gateways set when missing; a missing or changed id
 *                                  tells a gateway the store lost its data (lib/store/store-loss.ts)
 * Each is touched by single-key commands only (the tag just keeps them apart), so Redis Cluster needs nothing more.
 * Buckets are built by the engine: `a:<ns>/<api>[:e:<rule>]` (API scope), `k:<identity>[:a:<api>[:e:<METHOD path>]]`
 * (key scope), `q:<identity>[:a:<api>]` (quota); identity is `h:<key hash>` or `p:<expanded pattern>` (its `%`
 * and `:` escaped as %25 / %3A). In the key names `%`, `{` and `}` of a bucket are escaped as %25, %7B, %7D.
 */
import { sha256hex } from '../lib/hash.js';

const TAG_ESCAPES: Record<string, string> = { '%': '%25', '{': '%7B', '}': '%7D' };

function tag(bucket: string): string {
  // '{' and '}' inside the bucket would move the hash tag: escaped (with '%', so that two buckets never
  // share a key: replacing them with '_' made `acme{X}` and `acme_X_` one bucket)
  return `{${/[%{}]/.test(bucket) ? bucket.replace(/[%{}]/g, (c) => TAG_ESCAPES[c]!) : bucket}}`;
}

export const storeKeys = {
  log: (bucket: string) => `gw:${tag(bucket)}:log`,
  smoothing: (bucket: string) => `gw:${tag(bucket)}:sm`,
  sentinel: (bucket: string) => `gw:${tag(bucket)}:sentinel`,
  unlogged: (bucket: string) => `gw:${tag(bucket)}:unlogged`,
  spare: (bucket: string) => `gw:${tag(bucket)}:spare`,
  fixedWindow: (bucket: string, window: number) => `gw:${tag(bucket)}:fw:${window}`,
  quota: (bucket: string) => `gw:${tag(bucket)}:quota`,
  drl: (bucket: string) => `gw:${tag(bucket)}:drl`,
  peers: (group: string) => `gw:drl:${tag(group)}:peers`,
  oauthToken: (hash: string) => `gw:oauth:tok:{${hash}}`,
  oauthCode: (hash: string) => `gw:oauth:code:{${hash}}`,
  oauthCodeUsed: (hash: string) => `gw:oauth:code-used:{${hash}}`,
  oauthRefreshUsed: (hash: string) => `gw:oauth:rt-used:{${hash}}`,
  oauthFamily: (fam: string) => `gw:oauth:fam:{${fam}}`,
  oauthRevoked: (hash: string) => `gw:oauth:revoked:{${hash}}`,
  oauthClientTokens: (kind: string, ns: string, apiId: string, clientId: string) =>
    `gw:oauth:ctok:${kind}:{${sha256hex(`${ns}\u0000${apiId}\u0000${clientId}`)}}`,
  storeEpoch: 'gw:store:epoch',
};

/** Channel on which a revoked token's hash is published (gateways drop it from their caches). */
export const OAUTH_TOKEN_CHANNEL = 'gw:oauth:tokens';

/** The keys of one sliding-log / sentinel check, with the hash tag computed once. */
export function bucketKeys(bucket: string): {
  log: string;
  smoothing: string;
  sentinel: string;
  unlogged: string;
  spare: string;
} {
  const t = `gw:${tag(bucket)}:`;
  return {
    log: `${t}log`,
    smoothing: `${t}sm`,
    sentinel: `${t}sentinel`,
    unlogged: `${t}unlogged`,
    spare: `${t}spare`,
  };
}

let seq = 0;
// 8 base-36 characters of process identity (~2.8e12 values)
const PROC = Math.floor(Math.random() * 36 ** 8)
  .toString(36)
  .padStart(8, '0');
/** A log member unique across processes and calls, so equal timestamps never collapse into one entry. */
export function uniqueMember(now: number): string {
  seq = (seq + 1) % 1e12;
  // base 36 keeps log entries short in Redis (each member is stored once per entry): ~20 bytes
  return `${now.toString(36)}.${PROC}.${seq.toString(36)}`;
}

/**
 * The store marker of a controller's scope (one namespace, or `*` for all): controllers of different
 * namespaces may share one Redis. Its value says whether the store holds every session of the scope:
 * `restoring:<id>` while the controller (re)writes them into an empty store, `ready:<id>` once done (any
 * other value, as older controllers wrote: ready). The key missing means the store lost its data
 * (FLUSHALL, a restart or failover to an empty server) and the controller has not noticed yet.
 * Gateways read it before they trust "no such session" (stores/sessions-redis.ts).
 */
export const storeMarkerKey = (scope: string | undefined): string => `gw:controller:marker:${scope ?? '*'}`;
export const markerRestoring = (id: string): string => `restoring:${id}`;
/** `restore`: an id of this restore, so two reads of the marker around a lookup tell whether a restore finished between them. */
export const markerReady = (id: string, restore?: string): string =>
  restore ? `ready:${id}:${restore}` : `ready:${id}`;
/** Whether a marker value says the store holds every session (a missing marker: undefined). */
export const markerComplete = (value: string | null | undefined): boolean | undefined =>
  value === null || value === undefined ? undefined : !value.startsWith('restoring:');

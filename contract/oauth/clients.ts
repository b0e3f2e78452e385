/**
 * OAuth client records: what a gateway knows of an OAuthClient (docs/contract.md#oauth). In a cluster the controller
 * writes them to Redis (`gw:oauth:client:<namespace>/<api_id>/<client_id>`, each part URI-encoded; writes
 * and removals published on `gw:oauth:clients`); standalone builds them from its directory. The client
 * secret is only its SHA-256 (`secret_hash`), compared in constant time. `uid` tells two clients of the
 * same id apart (the CR's metadata.uid): a token names the uid it was issued to, so a client deleted and
 * created again does not bring its old tokens back.
 */
import { z } from 'zod';
import { safeEqual, sha256hex } from '../../lib/hash.js';

type MaybePromise<T> = T | Promise<T>;

export const CLIENT_PREFIX = 'gw:oauth:client:';
export const CLIENT_CHANNEL = 'gw:oauth:clients';

export const ClientRecordSchema = z.object({
  namespace: z.string(),
  name: z.string(),
  uid: z.string().optional(),
  api_id: z.string(),
  client_id: z.string(),
  client_name: z.string().optional(),
  description: z.string().optional(),
  policy_id: z.string().optional(),
  redirect_uri: z.string().optional(),
  meta_data: z.record(z.string(), z.unknown()).optional(),
  dcr_registration: z.object({ client_uri: z.string(), provider: z.string() }).optional(),
  secret_hash: z.string().regex(/^[0-9a-f]{64}$/),
});
export type ClientRecord = z.infer<typeof ClientRecordSchema>;

export const clientRecordKey = (ns: string, apiId: string, clientId: string): string =>
  `${CLIENT_PREFIX}${[ns, apiId, clientId].map(encodeURIComponent).join('/')}`;

/** Parses a client record's JSON (another process's output is still input); undefined when it does not validate. */
export function parseClientRecord(raw: string | null): ClientRecord | undefined {
  if (raw === null) return undefined;
  try {
    const r = ClientRecordSchema.safeParse(JSON.parse(raw));
    return r.success ? r.data : undefined;
  } catch {
    return undefined;
  }
}

/** Reads and validates a client record. */
export async function readClientRecord(
  redis: { get(k: string): Promise<string | null> },
  key: string,
): Promise<ClientRecord | undefined> {
  return parseClientRecord(await redis.get(key));
}

// compared when no client matched, so an unknown client id costs what a wrong secret costs
const NO_CLIENT_HASH = sha256hex('gw: no such client');

/** Constant-time check of a presented client secret against a record (or against nothing, in equal time). */
export function verifyClientSecret(record: ClientRecord | undefined, secret: string): boolean {
  const ok = safeEqual(sha256hex(secret), record?.secret_hash ?? NO_CLIENT_HASH);
  return ok && record !== undefined;
}

/** Where a gateway (or the facade) finds a client: synchronously when it is known without I/O. */
export interface ClientDirectory {
  /** The client, or null for none; undefined: only `get` can tell. */
  peek(ns: string, apiId: string, clientId: string): ClientRecord | null | undefined;
  get(ns: string, apiId: string, clientId: string): Promise<ClientRecord | undefined>;
}

/** A directory's client, synchronously when `peek` knows it. */
export function lookupClient(
  dir: ClientDirectory,
  ns: string,
  apiId: string,
  clientId: string,
): MaybePromise<ClientRecord | undefined> {
  const known = dir.peek(ns, apiId, clientId);
  return known === undefined ? dir.get(ns, apiId, clientId) : (known ?? undefined);
}

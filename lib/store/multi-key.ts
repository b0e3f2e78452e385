/**
 * Commands over many keys that work on a single server and on Redis Cluster alike.
 *   scanKeys: SCAN on every master of a cluster (ioredis sends a Cluster's SCAN to one node only, which
 *     holds about a third of the keys of a 3-master cluster); one SCAN on a single server.
 *   deleteKeys: one DEL on a single server; on a cluster one DEL per key (keys of different hash tags
 *     live in different slots, and a multi-key DEL across slots fails with CROSSSLOT).
 */
import type { Cluster, Redis } from 'ioredis';
import type { StoreClient } from './redis.js';

const isCluster = (c: StoreClient): c is Cluster => 'nodes' in c && typeof (c as Cluster).nodes === 'function';

/** The servers that hold keys: every master of a cluster, or the one server. */
export function keyHolders(client: StoreClient): Redis[] {
  return isCluster(client) ? client.nodes('master') : [client];
}

/** Each batch of keys matching `pattern` (a SCAN MATCH glob), from every server that holds keys. */
export async function* scanKeys(client: StoreClient, pattern: string, count = 1000): AsyncGenerator<string[]> {
  for (const node of keyHolders(client)) {
    let cursor = '0';
    do {
      const [next, keys] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', count);
      cursor = next;
      if (keys.length) yield keys;
    } while (cursor !== '0');
  }
}

/** Every key matching `pattern`, from every server that holds keys. */
export async function allKeys(client: StoreClient, pattern: string, count = 1000): Promise<string[]> {
  const out: string[] = [];
  for await (const keys of scanKeys(client, pattern, count)) out.push(...keys);
  return out;
}

/** Deletes keys of any hash tags; returns how many existed. */
export async function deleteKeys(client: StoreClient, keys: string[]): Promise<number> {
  if (keys.length === 0) return 0;
  if (!isCluster(client)) return client.del(...keys);
  const n = await Promise.all(keys.map((k) => client.del(k)));
  return n.reduce((a, b) => a + b, 0);
}

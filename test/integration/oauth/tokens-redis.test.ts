/**
 * The cluster's OAuth token store (stores/oauth/tokens-redis.ts) against real Redis, driven through the
 * grant rules (stores/oauth/grants.ts): every key expires exactly at its record's `exp`; only hashes are
 * stored; a replayed refresh token revokes its descendants, at once for a reader that cached them; a
 * deleted client's tokens are refused, and a client created again with the same id gets none of them;
 * a store emptied by FLUSHDB gets back the tokens the gateways keep (never a revoked one); tokens per
 * client are bounded in issuance order (one ms, clocks apart, two gateways at once), on a Redis Cluster too.
 */
import type { Redis } from 'ioredis';
import { pino } from 'pino';
import { ApiDefinitionResource } from '../../../crds/kinds.js';
import { compileConfig } from '../../../compiler/compile-config.js';
import type { CompiledApi, CompiledOAuth } from '../../../contract/config.js';
import { CLIENT_CHANNEL, clientRecordKey, type ClientRecord } from '../../../contract/oauth/clients.js';
import { RedisClientDirectory } from '../../../stores/oauth/client-directories.js';
import { hashOpaque, OAuthError, OAuthServer } from '../../../stores/oauth/grants.js';
import { RedisTokenStore } from '../../../stores/oauth/tokens-redis.js';
import { TokenKeeper } from '../../../stores/oauth/token-keeper.js';
import type { TokenRecord } from '../../../contract/oauth/tokens.js';
import { storeKeys } from '../../../contract/store-keys.js';
import { DEFAULT_STORE_DEADLINE_MS } from '../../../lib/store/store-calls.js';
import { StoreLossDetector } from '../../../lib/store/store-loss.js';
import { sha256hex } from '../../../lib/hash.js';
import { eventually } from '../../helpers/sidecar.js';
import { freshRedis, suiteRedisCluster } from '../../helpers/redis.js';
import { pkce } from '../../helpers/oauth.js';

const logger = pino({ level: 'silent' });
const NS = 'tok-ns';
const SECRET = 'client-secret-0123456789abcdef';
const CB = 'https://app.example/cb';

function oauthApi(meta: Record<string, unknown>): { api: CompiledApi; oauth: CompiledOAuth } {
  const def = ApiDefinitionResource.parse({
    apiVersion: 'gw.io/v1alpha1',
    kind: 'ApiDefinition',
    metadata: { name: 'orders', namespace: NS },
    spec: {
      use_oauth2: true,
      oauth_meta: { auth_login_redirect: 'https://login.example/consent', ...meta },
      proxy: { listen_path: '/orders/', target_url: 'http://upstream.invalid' },
    },
  });
  const api = compileConfig([def], []).config.apis[0]!;
  if (!api.oauth) throw new Error('not an OAuth API');
  return { api, oauth: api.oauth };
}

const client = (uid: string): ClientRecord => ({
  namespace: NS,
  name: 'app',
  uid,
  api_id: 'orders',
  client_id: 'app',
  redirect_uri: CB,
  secret_hash: sha256hex(SECRET),
});

describe('OAuth tokens in real Redis', () => {
  let conn: Redis;
  let readerConn: Redis;
  /** The writer (an issuing gateway) and a reader that caches for a minute: only the channels refresh it. */
  let server: OAuthServer;
  let reader: OAuthServer;
  let readerTokens: RedisTokenStore;
  let readerClients: RedisClientDirectory;
  const { api, oauth } = oauthApi({ access_token_expires: 120, refresh_token_expires: 600 });
  const raws: string[] = [SECRET];

  const writeClient = async (rec: ClientRecord): Promise<void> => {
    const key = clientRecordKey(NS, 'orders', 'app');
    await conn.set(key, JSON.stringify(rec));
    await conn.publish(CLIENT_CHANNEL, key);
  };
  const grant = async (form: Record<string, string>, s = server, uid = 'u1') => {
    const r = await s.token(api, oauth, client(uid), new URLSearchParams(form));
    raws.push(r.answer.access_token, ...(r.answer.refresh_token ? [r.answer.refresh_token] : []));
    return r.answer;
  };
  const code = async (challenge?: string): Promise<string> => {
    const c = await server.issueCode(client('u1'), CB, challenge);
    raws.push(c);
    return c;
  };
  const rejected = (p: Promise<unknown>): Promise<string> =>
    p.then(
      () => 'accepted',
      (e: unknown) => (e instanceof OAuthError ? e.error : String(e)),
    );

  beforeAll(async () => {
    conn = await freshRedis();
    readerConn = conn.duplicate();
    server = new OAuthServer(new RedisTokenStore(conn, logger, 0), new RedisClientDirectory(conn, logger, 0));
    readerTokens = new RedisTokenStore(readerConn, logger, 60_000);
    readerClients = new RedisClientDirectory(readerConn, logger, 60_000);
    await Promise.all([readerTokens.subscribe(), readerClients.subscribe()]);
    reader = new OAuthServer(readerTokens, readerClients);
    await writeClient(client('u1'));
  });
  afterAll(async () => {
    await readerTokens.close();
    await readerClients.close();
    conn.disconnect();
    readerConn.disconnect();
  });

  test('every key expires exactly at its record’s exp (access, refresh, code, family, use marks)', async () => {
    const p = pkce();
    const c = await code(p.challenge);
    const codeKey = storeKeys.oauthCode(hashOpaque(c));
    const codeRec = JSON.parse((await conn.get(codeKey))!) as { exp: number };
    expect(await conn.expiretime(codeKey)).toBe(codeRec.exp);
    expect(await conn.ttl(codeKey)).toBeGreaterThanOrEqual(59);
    expect(await conn.ttl(codeKey)).toBeLessThanOrEqual(60);

    const t = await grant({ grant_type: 'authorization_code', code: c, redirect_uri: CB, code_verifier: p.verifier });
    for (const [raw, life] of [
      [t.access_token, 120],
      [t.refresh_token!, 600],
    ] as const) {
      const key = storeKeys.oauthToken(hashOpaque(raw));
      const rec = JSON.parse((await conn.get(key))!) as { exp: number; iat: number; fam: string };
      expect(rec.exp - rec.iat).toBe(life);
      expect(await conn.expiretime(key)).toBe(rec.exp);
      const ms = await conn.pttl(key);
      expect(ms).toBeGreaterThan((life - 2) * 1000);
      expect(ms).toBeLessThanOrEqual(life * 1000);
      // the family lives as long as its longest-lived token
      expect(await conn.expiretime(storeKeys.oauthFamily(rec.fam))).toBeGreaterThanOrEqual(rec.exp);
    }
    const refreshRec = JSON.parse((await conn.get(storeKeys.oauthToken(hashOpaque(t.refresh_token!))))!) as {
      exp: number;
      fam: string;
    };
    expect(await conn.expiretime(storeKeys.oauthFamily(refreshRec.fam))).toBe(refreshRec.exp);
    expect(await conn.exists(codeKey)).toBe(0); // single use: taken
    // the used-code mark lives as long as the tokens it revokes (its expiry is taken after they are issued:
    // a second may have begun in between)
    const usedUntil = await conn.expiretime(storeKeys.oauthCodeUsed(hashOpaque(c)));
    expect(Math.abs(usedUntil - refreshRec.exp)).toBeLessThanOrEqual(1);

    const next = await grant({ grant_type: 'refresh_token', refresh_token: t.refresh_token! });
    // the used refresh token is gone; its use mark lives until the token would have expired
    expect(await conn.exists(storeKeys.oauthToken(hashOpaque(t.refresh_token!)))).toBe(0);
    expect(await conn.expiretime(storeKeys.oauthRefreshUsed(hashOpaque(t.refresh_token!)))).toBe(refreshRec.exp);
    expect(next.refresh_token).toBeDefined();
  });

  test('a token expires in Redis on time, with no sweeper (access_token_expires: 2)', async () => {
    // 2 s, not 1: the key is looked at once before it expires, which a loaded machine may take a second for
    const short = oauthApi({ access_token_expires: 2 });
    const r = await server.token(
      short.api,
      short.oauth,
      client('u1'),
      new URLSearchParams({ grant_type: 'client_credentials' }),
    );
    raws.push(r.answer.access_token);
    const key = storeKeys.oauthToken(hashOpaque(r.answer.access_token));
    expect(await conn.exists(key)).toBe(1);
    await eventually(async () => (await conn.exists(key)) === 0, 5000, 'the key expired');
    expect((await server.introspect(r.answer.access_token)).active).toBe(false);
  });

  test('a replayed refresh token revokes every descendant, at once for a reader that cached them', async () => {
    const first = await grant({ grant_type: 'authorization_code', code: await code(), redirect_uri: CB });
    const second = await grant({ grant_type: 'refresh_token', refresh_token: first.refresh_token! });
    const third = await grant({ grant_type: 'refresh_token', refresh_token: second.refresh_token! });
    // the reader has the live tokens cached for a minute
    expect((await reader.introspect(third.access_token)).active).toBe(true);
    expect((await reader.introspect(second.access_token)).active).toBe(true);
    expect((await reader.introspect(third.refresh_token!)).active).toBe(true);

    expect(await rejected(grant({ grant_type: 'refresh_token', refresh_token: first.refresh_token! }))).toBe(
      'invalid_grant',
    );
    for (const t of [first.access_token, second.access_token, third.access_token, third.refresh_token!])
      expect(await conn.exists(storeKeys.oauthToken(hashOpaque(t)))).toBe(0);
    await eventually(
      async () =>
        !(await reader.introspect(third.access_token)).active && !(await reader.introspect(second.access_token)).active,
      1000,
      'the reader dropped the revoked family',
    );
    expect(await rejected(grant({ grant_type: 'refresh_token', refresh_token: third.refresh_token! }))).toBe(
      'invalid_grant',
    );
  });

  test('two uses of one refresh token at once: one rotation at most, and the family is revoked', async () => {
    const t = await grant({ grant_type: 'authorization_code', code: await code(), redirect_uri: CB });
    const outcomes = await Promise.all(
      [0, 1, 2].map(() => rejected(grant({ grant_type: 'refresh_token', refresh_token: t.refresh_token! }))),
    );
    expect(outcomes.filter((o) => o === 'accepted').length).toBeLessThanOrEqual(1);
    expect(outcomes.filter((o) => o === 'invalid_grant').length).toBeGreaterThanOrEqual(2);
    expect((await server.introspect(t.access_token)).active).toBe(false);
  });

  test('a code redeemed twice: invalid_grant, and the tokens of its first redemption are revoked', async () => {
    const c = await code();
    const t = await grant({ grant_type: 'authorization_code', code: c, redirect_uri: CB });
    expect((await reader.introspect(t.access_token)).active).toBe(true);
    expect(await rejected(grant({ grant_type: 'authorization_code', code: c, redirect_uri: CB }))).toBe(
      'invalid_grant',
    );
    await eventually(async () => !(await reader.introspect(t.access_token)).active, 1000, 'revoked at the reader');
  });

  test('a deleted client: its tokens refused at once by a caching reader; created again (new uid): still refused', async () => {
    const cc = await grant({ grant_type: 'client_credentials' });
    expect((await reader.introspect(cc.access_token)).active).toBe(true);
    const key = clientRecordKey(NS, 'orders', 'app');
    await conn.del(key);
    await conn.publish(CLIENT_CHANNEL, key);
    await eventually(async () => !(await reader.introspect(cc.access_token)).active, 1000, 'client gone at the reader');
    expect(await reader.authenticate(api, 'app', SECRET)).toBeUndefined();
    await writeClient(client('u2'));
    await eventually(async () => (await reader.authenticate(api, 'app', SECRET)) !== undefined, 1000, 'client back');
    expect((await reader.introspect(cc.access_token)).active).toBe(false);
    expect((await server.introspect(cc.access_token)).active).toBe(false);
    const fresh = await grant({ grant_type: 'client_credentials' }, server, 'u2');
    expect((await reader.introspect(fresh.access_token)).active).toBe(true);
  });

  test('only hashes: no raw token, code or secret in any key name or value', async () => {
    const keys = await conn.keys('*');
    expect(keys.filter((k) => k.startsWith('gw:oauth:tok:')).length).toBeGreaterThan(5);
    const values: string[] = [];
    for (const k of keys) {
      const type = await conn.type(k);
      if (type === 'string') values.push((await conn.get(k)) ?? '');
      else if (type === 'set') values.push(...(await conn.smembers(k)));
    }
    const text = [...keys, ...values].join('\n');
    expect(raws.length).toBeGreaterThan(15);
    for (const r of raws) expect({ r, found: text.includes(r) }).toEqual({ r, found: false });
    for (const k of keys.filter((k) => k.startsWith('gw:oauth:tok:')))
      expect(k).toMatch(/^gw:oauth:tok:\{[0-9a-f]{64}\}$/);
  });

  test('a gateway keeps at most `max` token records: the least recently used goes first', () => {
    const keeper = new TokenKeeper(conn, logger, {
      loss: new StoreLossDetector(conn, logger, { epochKey: storeKeys.storeEpoch }),
      max: 3,
    });
    const exp = Date.now() / 1000 + 600;
    const rec = (n: number, e = exp): TokenRecord => ({
      kind: 'access',
      ns: NS,
      api_id: 'orders',
      client_id: 'app',
      cuid: 'u1',
      iat: n,
      exp: e,
    });
    for (const n of [1, 2, 3]) keeper.keep(`h${n}`, rec(n));
    expect(keeper.record('h1')).toBeDefined(); // used: h2 is now the least recently used
    keeper.keep('h4', rec(4));
    expect(keeper.size).toBe(3);
    expect(keeper.record('h2')).toBeUndefined();
    for (const h of ['h1', 'h3', 'h4']) expect(keeper.record(h)).toBeDefined();
    keeper.keep('h5', rec(5, Date.now() / 1000 - 1)); // expired: not kept
    expect(keeper.size).toBe(3);
  });

  // last: it empties the store
  test('the store emptied: kept tokens answer at once and are written back at their exp; revoked ones never', async () => {
    const wConn = conn.duplicate();
    const kConn = conn.duplicate();
    // W issues and revokes (a gateway); K read some tokens and missed every revocation (not subscribed)
    // each gateway's loss detector, read only when asked (no background poll) to set the order of events
    const [wLoss, kLoss] = [wConn, kConn].map(
      (c) => new StoreLossDetector(c, logger, { epochKey: storeKeys.storeEpoch, holdMs: 1500 }),
    ) as [StoreLossDetector, StoreLossDetector];
    const wTokens = new RedisTokenStore(wConn, logger, 0, DEFAULT_STORE_DEADLINE_MS, { loss: wLoss });
    const kTokens = new RedisTokenStore(kConn, logger, 0, DEFAULT_STORE_DEADLINE_MS, { loss: kLoss });
    try {
      const w = new OAuthServer(wTokens, new RedisClientDirectory(wConn, logger, 0));
      const cc = { grant_type: 'client_credentials' };
      const [t1, t2, t3] = [await grant(cc, w), await grant(cc, w), await grant(cc, w)];
      const [h1, h2, h3] = [t1, t2, t3].map((t) => hashOpaque(t.access_token));
      const rec1 = JSON.parse((await conn.get(storeKeys.oauthToken(h1!)))!) as { exp: number };
      await w.revoke(client('u1'), t2.access_token); // before the loss
      expect(await kTokens.get(h1!)).toEqual(rec1);
      expect(await kTokens.get(h3!)).toBeDefined();
      await Promise.all([wLoss.check(), kLoss.check()]); // both know the store's epoch

      await conn.flushdb();
      await writeClient(client('u1')); // the controller restores the client
      // right after the loss, before any write-back: the kept record answers (not "no such token")
      expect(await wTokens.get(h1!)).toEqual(rec1);
      expect(await w.introspect(t1.access_token)).toMatchObject({ active: true });
      await w.revoke(client('u1'), t3.access_token); // after the loss: marked until its exp
      expect(await conn.exists(storeKeys.oauthRevoked(h3!))).toBe(1);

      // K notices the loss and writes back what it keeps, except the token revoked meanwhile
      expect(await kLoss.check()).toBe(true);
      await eventually(async () => (await conn.exists(storeKeys.oauthToken(h1!))) === 1, 5000, 'written back');
      await kTokens.keeper!.writeBack();
      await wTokens.keeper!.writeBack();
      expect(JSON.parse((await conn.get(storeKeys.oauthToken(h1!)))!)).toEqual(rec1);
      expect(await conn.expiretime(storeKeys.oauthToken(h1!))).toBe(Math.ceil(rec1.exp));
      expect(await conn.exists(storeKeys.oauthToken(h2!))).toBe(0);
      expect(await conn.exists(storeKeys.oauthToken(h3!))).toBe(0);
      expect((await w.introspect(t2.access_token)).active).toBe(false);
      expect((await w.introspect(t3.access_token)).active).toBe(false);
      // a gateway that never saw a token: after the restore window, found in the store
      const freshConn = conn.duplicate();
      const freshLoss = new StoreLossDetector(freshConn, logger, { epochKey: storeKeys.storeEpoch });
      freshLoss.start();
      const fresh = new RedisTokenStore(freshConn, logger, 0, DEFAULT_STORE_DEADLINE_MS, { loss: freshLoss });
      try {
        expect(await fresh.get(h1!)).toEqual(rec1);
        expect(await fresh.get(h3!)).toBeUndefined();
      } finally {
        freshLoss.stop();
        await fresh.close();
        freshConn.disconnect();
      }
    } finally {
      await wTokens.close();
      await kTokens.close();
      wConn.disconnect();
      kConn.disconnect();
    }
  });

  test('max_tokens_per_client: past the bound the oldest of the kind is revoked (at once for a caching reader); a revoked one stops counting', async () => {
    const bounded = oauthApi({ access_token_expires: 120, refresh_token_expires: 600, max_tokens_per_client: 3 });
    expect(bounded.oauth.maxTokensPerClient).toBe(3);
    const cc = new URLSearchParams({ grant_type: 'client_credentials' });
    const issue = async (): Promise<string> => {
      const t = (await server.token(bounded.api, bounded.oauth, client('u1'), cc)).answer.access_token;
      raws.push(t);
      return t;
    };
    const set = storeKeys.oauthClientTokens('access', NS, 'orders', 'app');
    const tokens: string[] = [];
    for (let i = 0; i < 3; i++) tokens.push(await issue());
    // the reader has every one cached (60 s): only the revocation channel can drop it
    for (const t of tokens) expect(await readerTokens.get(hashOpaque(t))).toBeDefined();
    tokens.push(await issue(), await issue());
    expect(await conn.zcard(set)).toBe(3);
    const hashes = tokens.map((t) => hashOpaque(t));
    expect(new Set(await conn.zrange(set, '0', '-1'))).toEqual(new Set(hashes.slice(2)));
    for (const h of hashes.slice(0, 2)) {
      expect(await conn.exists(storeKeys.oauthToken(h))).toBe(0);
      expect(await conn.exists(storeKeys.oauthRevoked(h))).toBe(1);
    }
    await eventually(
      async () =>
        (await readerTokens.get(hashes[0]!)) === undefined && (await readerTokens.get(hashes[1]!)) === undefined,
      2000,
      'reader dropped the revoked tokens',
    );
    for (const h of hashes.slice(2)) expect(await readerTokens.get(h)).toBeDefined();
    // a revoked token leaves the set: the next issuance revokes nobody
    await server.revoke(client('u1'), tokens[4]!);
    expect(await conn.zcard(set)).toBe(2);
    const next = await issue();
    expect(await conn.zcard(set)).toBe(3);
    for (const t of [tokens[2]!, tokens[3]!, next])
      expect(await conn.exists(storeKeys.oauthToken(hashOpaque(t)))).toBe(1);
    // the set expires with the last of its tokens
    const last = JSON.parse((await conn.get(storeKeys.oauthToken(hashOpaque(next))))!) as { exp: number };
    expect(Math.abs((await conn.expiretime(set)) - last.exp)).toBeLessThanOrEqual(1);
  });

  test('max_tokens_per_client counts in issuance order: tokens issued in one ms, a gateway whose clock is behind, two gateways at once', async () => {
    const t0 = Date.now();
    const iat = Math.floor(t0 / 1000);
    const rec = (clientId: string): TokenRecord => ({
      kind: 'access',
      ns: NS,
      api_id: 'orders',
      client_id: clientId,
      cuid: 'u1',
      iat,
      exp: iat + 120,
    });
    // hashes in descending order: a tie of scores would pop the newest (the lowest hash) first
    const hashes = (tag: string, n: number): string[] =>
      Array.from({ length: n }, (_, i) => `${tag}${'fedcba9876543210'[i]!.repeat(63)}`);
    const live = async (hs: string[]): Promise<boolean[]> =>
      Promise.all(hs.map(async (h) => (await conn.exists(storeKeys.oauthToken(h))) === 1));
    const members = async (clientId: string): Promise<string[]> =>
      conn.zrange(storeKeys.oauthClientTokens('access', NS, 'orders', clientId), '0', '-1');

    // one gateway, one frozen millisecond
    const frozen = new RedisTokenStore(conn, logger, 0, DEFAULT_STORE_DEADLINE_MS, undefined, () => t0);
    const same = hashes('a', 5);
    for (const h of same) await frozen.put(h, rec('same-ms'), 3);
    expect(await live(same)).toEqual([false, false, true, true, true]);
    expect(await members('same-ms')).toEqual(same.slice(2));

    // a second gateway whose clock is 5 s behind: its token is still the newest
    const behind = new RedisTokenStore(conn, logger, 0, DEFAULT_STORE_DEADLINE_MS, undefined, () => t0 - 5000);
    const skew = hashes('b', 5);
    for (const h of skew.slice(0, 3)) await frozen.put(h, rec('skew'), 3);
    await behind.put(skew[3]!, rec('skew'), 3);
    expect(await live(skew.slice(0, 4))).toEqual([false, true, true, true]);
    await frozen.put(skew[4]!, rec('skew'), 3);
    expect(await live(skew)).toEqual([false, false, true, true, true]);
    expect(await members('skew')).toEqual(skew.slice(2));

    // two gateways issuing at once revoke only what is over the bound
    const both = hashes('c', 5);
    for (const h of both.slice(0, 3)) await frozen.put(h, rec('both'), 3);
    await Promise.all([frozen.put(both[3]!, rec('both'), 3), behind.put(both[4]!, rec('both'), 3)]);
    expect(await live(both)).toEqual([false, false, true, true, true]);
    expect(await members('both')).toHaveLength(3);
    await Promise.all([frozen.close(), behind.close()]);
  });
});

describe('OAuth tokens on a Redis Cluster (3 masters)', () => {
  const cluster = suiteRedisCluster();

  test('max_tokens_per_client: the bound’s script and the revocations run on a cluster (no CROSSSLOT), oldest first', async () => {
    const bounded = oauthApi({ access_token_expires: 120, refresh_token_expires: 600, max_tokens_per_client: 3 });
    const store = new RedisTokenStore(cluster(), logger, 0);
    const server = new OAuthServer(store, new RedisClientDirectory(cluster(), logger, 0));
    try {
      const cc = new URLSearchParams({ grant_type: 'client_credentials' });
      const tokens: string[] = [];
      for (let i = 0; i < 5; i++)
        tokens.push((await server.token(bounded.api, bounded.oauth, client('u1'), cc)).answer.access_token);
      const found = await Promise.all(tokens.map(async (t) => (await store.get(hashOpaque(t))) !== undefined));
      expect(found).toEqual([false, false, true, true, true]);
      const set = storeKeys.oauthClientTokens('access', NS, 'orders', 'app');
      expect(await cluster().zcard(set)).toBe(3);
    } finally {
      await store.close();
    }
  });
});

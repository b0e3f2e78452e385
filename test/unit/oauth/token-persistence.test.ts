/**
 * Standalone's OAuth token persistence (standalone/oauth-state.ts) and the per-client bound of the memory
 * store (contract/oauth/tokens.ts), on a real directory: an issuance appends its own journal lines, so
 * the bytes it writes do not grow with the tokens held; compactions stay amortised under churn; past the
 * bound the oldest token of the client goes first; what was issued, revoked and used is back after a
 * restart (a new persistence on the same directory), a journal line cut short by a crash is skipped.
 */
import { appendFileSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { pino } from 'pino';
import { COMPACT_MIN_LINES, OAUTH_STATE_FILE, OAuthTokenPersistence } from '../../../standalone/oauth-state.js';
import type { TokenRecord } from '../../../contract/oauth/tokens.js';
import { cleanup, tempDir } from '../../helpers/standalone.js';

const logger = pino({ level: 'silent' });
const NOW = 1_800_000_000;
const rec = (client: string, i: number, kind: TokenRecord['kind'] = 'access'): TokenRecord => ({
  kind,
  ns: 'default',
  api_id: 'orders',
  client_id: client,
  cuid: 'u1',
  iat: NOW + i,
  exp: NOW + 3600 + i,
});
const hash = (client: string, i: number): string => `${client}-${String(i).padStart(8, '0')}`.padEnd(64, 'f');

describe('standalone OAuth token persistence', () => {
  const dirs: string[] = [];
  const fresh = (): { dir: string; p: OAuthTokenPersistence } => {
    const dir = tempDir('gw-oauth-state-');
    dirs.push(dir);
    const p = new OAuthTokenPersistence(dir, logger, () => NOW);
    p.load();
    return { dir, p };
  };
  afterAll(() => dirs.forEach(cleanup));

  test('an issuance writes the same bytes with 0 and with 6,000 tokens held (no rewrite of the whole state)', async () => {
    const bytesFor500 = async (p: OAuthTokenPersistence, from: number): Promise<number> => {
      const before = p.bytesWritten;
      for (let i = from; i < from + 500; i++) await p.store.put(hash('m', i), rec('m', i));
      return p.bytesWritten - before;
    };
    const empty = fresh().p;
    // the first write of a new directory writes its (empty) state once: counted apart
    await empty.store.put(hash('m', -1), rec('m', -1));
    const at0 = await bytesFor500(empty, 0);
    const full = fresh().p;
    for (let c = 0; c < 6; c++) for (let i = 0; i < 1000; i++) await full.store.put(hash(`c${c}`, i), rec(`c${c}`, i));
    expect(full.store.size()).toBe(6000);
    const compactions = full.compactions;
    const at6000 = await bytesFor500(full, 0);
    expect(full.compactions).toBe(compactions);
    // one journal line per token (~300 bytes), whatever the store holds; the old whole-file rewrite
    // wrote ~6000 records (~1.8 MB) per issuance at 6,000 tokens
    expect(at0 / 500).toBeLessThan(400);
    expect(at6000 / 500).toBeLessThan(400);
    expect(Math.abs(at6000 - at0)).toBeLessThan(at0 * 0.05);
    await empty.stop();
    await full.stop();
  });

  test('under churn (issue and revoke, 1,000 live) compactions keep the bytes per change bounded and the journal short', async () => {
    const { dir, p } = fresh();
    for (let i = 0; i < 1000; i++) await p.store.put(hash('live', i), rec('live', i));
    const before = p.bytesWritten;
    const changes = 20_000;
    for (let i = 0; i < changes / 2; i++) {
      await p.store.put(hash('churn', i), rec('churn', i));
      await p.store.revoke(hash('churn', i));
    }
    expect(p.compactions).toBeGreaterThan(2);
    // a line is ~100–300 bytes; a compaction writes at most half a record per line appended since the last
    expect((p.bytesWritten - before) / changes).toBeLessThan(400);
    await p.stop();
    const journals = readdirSync(dir).filter((f) => f.endsWith('.log'));
    expect(journals).toHaveLength(1);
    const lines = readFileSync(join(dir, journals[0]!), 'utf8').split('\n').length - 1;
    expect(lines).toBeLessThanOrEqual(Math.max(COMPACT_MIN_LINES, 2 * 1000) + 2);
    expect(statSync(join(dir, OAUTH_STATE_FILE)).mode & 0o777).toBe(0o600);
    expect(statSync(join(dir, journals[0]!)).mode & 0o777).toBe(0o600);
  });

  test('the bound: past maxPerClient the oldest token of that client and kind is revoked, others untouched', async () => {
    const { p } = fresh();
    const revoked: string[] = [];
    p.store.onRevoke((h) => revoked.push(h));
    await p.store.put(hash('other', 0), rec('other', 0), 3);
    await p.store.put(hash('b', 100), rec('b', 100, 'refresh'), 3);
    for (let i = 0; i < 5; i++) await p.store.put(hash('b', i), rec('b', i), 3);
    expect(revoked).toEqual([hash('b', 0), hash('b', 1)]);
    for (const i of [0, 1]) expect(p.store.peek(hash('b', i))).toBeNull();
    for (const i of [2, 3, 4]) expect(p.store.peek(hash('b', i))).not.toBeNull();
    expect(p.store.clientTokens('access', 'default', 'orders', 'b')).toBe(3);
    // another client, and the other kind of the same client, are counted apart
    expect(p.store.peek(hash('other', 0))).not.toBeNull();
    expect(p.store.peek(hash('b', 100))).not.toBeNull();
    // a revoked token stops counting: the next one revokes nobody
    await p.store.revoke(hash('b', 4));
    revoked.length = 0;
    await p.store.put(hash('b', 5), rec('b', 5), 3);
    expect(revoked).toEqual([]);
    await p.stop();
  });

  test('a restart gets back what was issued, revoked, evicted and used; a line cut short by a crash is skipped', async () => {
    const { dir, p } = fresh();
    for (let i = 0; i < 5; i++) await p.store.put(hash('r', i), rec('r', i), 3); // 0 and 1 evicted
    await p.store.revoke(hash('r', 2));
    await p.store.putCode('c'.repeat(64), {
      ns: 'default',
      api_id: 'orders',
      client_id: 'r',
      cuid: 'u1',
      redirect_uri: 'https://app.example/cb',
      exp: NOW + 60,
    });
    expect(await p.store.useRefresh('u'.repeat(64), 'fam1', NOW + 600)).toBe(true);
    await p.stop();
    const journal = readdirSync(dir).find((f) => f.endsWith('.log'))!;
    appendFileSync(join(dir, journal), '{"op":"tok","h":"x'); // a write cut short

    const again = new OAuthTokenPersistence(dir, logger, () => NOW);
    again.load();
    for (const i of [0, 1, 2]) expect(again.store.peek(hash('r', i))).toBeNull();
    for (const i of [3, 4]) expect(again.store.peek(hash('r', i))).toEqual(rec('r', i));
    expect(await again.store.refreshFamily('u'.repeat(64))).toBe('fam1');
    expect(await again.store.takeCode('c'.repeat(64))).toMatchObject({ client_id: 'r' });
    // the bound still counts the restored tokens in issuance order
    await again.store.put(hash('r', 5), rec('r', 5), 2);
    expect(again.store.peek(hash('r', 3))).toBeNull();
    expect(again.store.peek(hash('r', 4))).not.toBeNull();
    // the restored state was compacted: one journal, the old one gone
    expect(readdirSync(dir).filter((f) => f.endsWith('.log'))).toHaveLength(1);
    expect(readdirSync(dir)).not.toContain(journal);
    await again.stop();
  });
});

/**
 * gw standalone's start-up path (DirSource's first read — listing, parsing, validation — then
 * StandaloneState's first apply: compiled config, sessions) grows linearly with the number of keys: the
 * time the keys add (over the same directory without keys) per key with 20,000 keys stays within a few
 * times that with 2,000 (a quadratic step makes it ten times). Interleaved rounds, the best of each size,
 * so a loaded machine slows all alike.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DirSource } from '../../../standalone/dir-source.js';
import { StandaloneState } from '../../../standalone/state.js';
import { MemorySessionStore } from '../../../stores/sessions-memory.js';
import { createLogger } from '../../../lib/logger.js';
import { sha256hex } from '../../../lib/hash.js';

const logger = createLogger('test', 'error');

function fixture(keys: number): string {
  const dir = mkdtempSync(join(tmpdir(), 'gw-startup-scale-'));
  for (let i = 0; i < 100; i++)
    writeFileSync(
      join(dir, `api-${i}.yaml`),
      `apiVersion: gw.io/v1alpha1\nkind: ApiDefinition\nmetadata: {name: api-${i}}\nspec:\n  api_id: api-${i}\n  proxy: {listen_path: /api-${i}/, target_url: 'http://127.0.0.1:9'}\n`,
    );
  for (let f = 0; f < Math.ceil(keys / 1000); f++) {
    const docs: string[] = [];
    for (let k = f * 1000; k < (f + 1) * 1000; k++)
      docs.push(
        `apiVersion: gw.io/v1alpha1\nkind: AccessKey\nmetadata: {name: k-${k}}\nspec: {key_hash: ${sha256hex(`k-${k}`)}, rate: 100, per: 1, access_rights: {api-${k % 100}: {api_id: api-${k % 100}}}}\n`,
      );
    writeFileSync(join(dir, `keys-${f}.yaml`), docs.join('---\n'));
  }
  return dir;
}

/** Milliseconds from nothing to every key's session stored. */
async function startUp(dir: string, keys: number): Promise<number> {
  const store = new MemorySessionStore();
  const source = new DirSource(dir, logger);
  const state = new StandaloneState(dir, store, logger);
  const t0 = performance.now();
  await source.load();
  await state.apply(source.current());
  const ms = performance.now() - t0;
  source.stop();
  expect(source.current().keys).toHaveLength(keys);
  if (keys) expect(await store.get(sha256hex(`k-${keys - 1}`))).toBeDefined();
  return ms;
}

test('start-up time per key: 20,000 keys within 3× the time per key of 2,000', async () => {
  const none = fixture(0);
  const small = fixture(2_000);
  const large = fixture(20_000);
  try {
    await startUp(small, 2_000); // warm-up: modules, JIT
    const best = { none: Infinity, small: Infinity, large: Infinity };
    for (let round = 0; round < 3; round++) {
      best.none = Math.min(best.none, await startUp(none, 0));
      best.small = Math.min(best.small, await startUp(small, 2_000));
      best.large = Math.min(best.large, await startUp(large, 20_000));
    }
    // what the keys add; at least 10 µs a key for 2,000 (a noisy baseline cannot make it vanish)
    const perKey = {
      small: Math.max(best.small - best.none, 20) / 2_000,
      large: (best.large - best.none) / 20_000,
    };
    const ratio = perKey.large / perKey.small;
    console.log(
      `start-up: no keys ${best.none.toFixed(0)} ms, 2,000 keys ${best.small.toFixed(0)} ms, 20,000 keys ${best.large.toFixed(0)} ms; per key ×${ratio.toFixed(2)}`,
    );
    expect(ratio).toBeLessThan(3);
  } finally {
    for (const d of [none, small, large]) rmSync(d, { recursive: true, force: true });
  }
}, 120_000);

/**
 * gw standalone's reload path in process, without HTTP: DirSource (standalone/dir-source.ts) +
 * StandaloneState (standalone/state.ts) over a directory of GW_BENCH_SCALE_APIS one-API files (10,000) and
 * GW_BENCH_SCALE_KEYS keys (100,000, 1,000 per file). Prints the first load (read, parse, apply), then one
 * edited API file and one edited key file applied through the watch path: the time to apply and the
 * longest event-loop stall meanwhile. Run: `node dist/test/bench/standalone-apply.js` (`--cpu-prof` to profile).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DirSource } from '../../standalone/dir-source.js';
import { StandaloneState } from '../../standalone/state.js';
import { MemorySessionStore } from '../../contract/sessions.js';
import { createLogger } from '../../lib/logger.js';
import { sha256hex } from '../../lib/hash.js';

const APIS = Number(process.env.GW_BENCH_SCALE_APIS ?? 10_000);
const KEYS = Number(process.env.GW_BENCH_SCALE_KEYS ?? 100_000);

const apiYaml = (i: number, listen = `/api-${i}/`): string =>
  `apiVersion: gw.io/v1alpha1\nkind: ApiDefinition\nmetadata: {name: api-${i}}\nspec:\n  api_id: api-${i}\n  use_keyless: true\n  proxy: {listen_path: ${listen}, target_url: 'http://127.0.0.1:9'}\n`;
const keyDoc = (k: number, rate = 100): string =>
  `apiVersion: gw.io/v1alpha1\nkind: AccessKey\nmetadata: {name: k-${k}}\nspec: {key_hash: ${sha256hex(`bench-${k}`)}, rate: ${rate}, per: 1}\n`;
const keysFile = (f: number, rate = 100): string => {
  const docs: string[] = [];
  for (let k = f * 1000; k < (f + 1) * 1000 && k < KEYS; k++) docs.push(keyDoc(k, rate));
  return docs.join('---\n');
};

/** The longest gap between 1 ms timer ticks while `work` runs. */
async function stallDuring<T>(work: () => Promise<T>): Promise<{ result: T; ms: number; stallMs: number }> {
  let last = performance.now();
  let worst = 0;
  const timer = setInterval(() => {
    const now = performance.now();
    worst = Math.max(worst, now - last);
    last = now;
  }, 1);
  const t0 = performance.now();
  const result = await work();
  const ms = performance.now() - t0;
  clearInterval(timer);
  return { result, ms, stallMs: Math.max(worst, performance.now() - last) };
}

const dir = mkdtempSync(join(tmpdir(), 'gw-bench-apply-'));
try {
  for (let i = 0; i < APIS; i++) writeFileSync(join(dir, `api-${i}.yaml`), apiYaml(i));
  for (let f = 0; f < KEYS / 1000; f++) writeFileSync(join(dir, `keys-${f}.yaml`), keysFile(f));
  const logger = createLogger('bench', 'warn');
  const source = new DirSource(dir, logger);
  const state = new StandaloneState(dir, new MemorySessionStore(), logger);
  source.onChange((s) => state.apply(s));
  const t0 = performance.now();
  await source.load();
  const loadedMs = performance.now() - t0;
  await state.apply(source.current());
  const startMs = performance.now() - t0;
  console.log(
    `standalone-apply: ${APIS} APIs + ${KEYS} keys: read + parsed in ${loadedMs.toFixed(0)} ms, applied after ${startMs.toFixed(0)} ms (${state.current().apis.length} APIs served)`,
  );
  const last = APIS - 1;
  for (const [what, file, text] of [
    ['an API file', `api-${last}.yaml`, apiYaml(last, '/moved/')],
    ['a file of 1,000 keys', 'keys-0.yaml', keysFile(0, 7)],
  ] as const) {
    writeFileSync(join(dir, file), text);
    const from = process.hrtime.bigint() / 1000n;
    const r = await stallDuring(() => source.changed([file]));
    // the window in the clock of a --cpu-prof profile (µs), for reading its longest synchronous stretches
    if (process.env.GW_BENCH_WINDOWS) console.log(`window ${from} ${process.hrtime.bigint() / 1000n}`);
    console.log(
      `standalone-apply: one edit of ${what} applied in ${r.ms.toFixed(0)} ms; longest event-loop stall ${r.stallMs.toFixed(0)} ms`,
    );
  }
  source.stop();
} finally {
  rmSync(dir, { recursive: true, force: true });
}

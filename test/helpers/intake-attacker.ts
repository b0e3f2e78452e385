/**
 * The sender of test/integration/streams/hostile-intake.alone.test.ts's attack, in a process of its own so the
 * test's worker only times its probes: an attacker's CPU is not the gateway's host's in production, and
 * sending 19 MB/s from the worker delayed the worker's own timers. Started by `attackIntake`
 * (test/helpers/stream-intake.ts): prints `ready` and a flat body's size once its bodies are built, sends them when a line
 * arrives on stdin, then prints the statuses as one JSON line.
 *   node dist/test/helpers/intake-attacker.js URL RATE COUNT DEEP_EVERY
 */
import { createInterface } from 'node:readline';
import { postEventTo } from './stream-intake.js';

const [url, rate, count, deepEvery] = [process.argv[2]!, ...process.argv.slice(3, 6).map(Number)] as [
  string,
  number,
  number,
  number,
];
const deep = Buffer.from(`{"user":{"id":${'['.repeat(500_000)}${']'.repeat(500_000)}}}`);
const flat = Buffer.from(
  JSON.stringify({ user: { id: 'u' }, items: Array.from({ length: 130_000 }, () => ({ a: 1 })) }),
);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const lines = createInterface({ input: process.stdin });
console.log(`ready ${flat.length}`);
await new Promise((r) => lines.once('line', r));
const out = { flat: [] as number[], deep: [] as number[] };
const sends: Promise<void>[] = [];
const start = performance.now();
for (let i = 0; i < count; i++) {
  await sleep(Math.max(0, start + (i * 1000) / rate - performance.now()));
  const isDeep = i % deepEvery === deepEvery - 1;
  sends.push(postEventTo(url, isDeep ? deep : flat).then((s) => void (isDeep ? out.deep : out.flat).push(s)));
}
await Promise.all(sends);
console.log(JSON.stringify(out));
lines.close();

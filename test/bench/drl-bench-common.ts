/**
 * Shared by the DRL measurements (`make bench-drl`: drl-shapes.ts, drl-store.ts): keyless API manifests, a
 * watchdog that bounds the run, the gateways and Redis started (stopped on exit whatever happens), Redis's
 * own command counts, and the conditions printed with every table (time, commit, load average).
 */
import { execFileSync } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { Redis } from 'ioredis';
import type { RedisHandle } from '../harness/redis.js';
import { tempDir, type Standalone } from '../helpers/standalone.js';

/** A keyless API `name` at /name/ proxying to `${upstream}/${name}`, with a global limit (and `limit_by`). */
export function apiYaml(name: string, upstream: string, rate: number, per: number, limitBy?: string): string {
  const by = limitBy === undefined ? '' : `, limit_by: '${limitBy}'`;
  return `apiVersion: gw.io/v1alpha1\nkind: ApiDefinition\nmetadata: {name: ${name}}\nspec:\n  use_keyless: true\n  proxy: {listen_path: /${name}/, target_url: '${upstream}/${name}', strip_listen_path: true}\n  global_rate_limit: {rate: ${rate}, per: ${per}${by}}\n`;
}

const gateways: Standalone[] = [];
const redises: RedisHandle[] = [];

/** Keeps a started gateway (or Redis) to stop it on exit. */
export function track<T extends Standalone | RedisHandle>(x: T): T {
  if ('gateway' in x) gateways.push(x);
  else redises.push(x);
  return x;
}

const dirs: string[] = [];

/** A temporary directory, removed on exit. */
export function scratch(prefix: string): string {
  const d = tempDir(prefix);
  dirs.push(d);
  return d;
}

/** SIGKILLs whatever is still running and removes the scratch directories (the exit path: nothing may outlive the run). */
function killAll(): void {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
  for (const g of gateways) if (g.proc.exitCode === null && g.proc.signalCode === null) g.proc.kill('SIGKILL');
  for (const r of redises) if (r.proc.exitCode === null && r.proc.signalCode === null) r.proc.kill('SIGKILL');
}

/** `stop()`, or SIGKILL after `ms`. */
async function stopWithin(stop: () => Promise<unknown>, kill: () => void, ms: number): Promise<void> {
  let t: NodeJS.Timeout | undefined;
  await Promise.race([stop(), new Promise<void>((r) => (t = setTimeout(() => (kill(), r()), ms)))]);
  clearTimeout(t);
}

/** Stops every gateway cleanly (SIGTERM gives leases back), then Redis; whatever is still running after 15 s is killed. */
export async function stopAll(): Promise<void> {
  await Promise.all(gateways.map((g) => stopWithin(g.stop, () => g.proc.kill('SIGKILL'), 15_000)));
  await Promise.all(redises.map((r) => stopWithin(r.stop, () => r.proc.kill('SIGKILL'), 15_000)));
}

/** Ends the process after `seconds` (a hung run must not hold the machine) and kills children on any exit. */
export function bounded(name: string, seconds: number): NodeJS.Timeout {
  process.on('exit', killAll);
  for (const sig of ['SIGINT', 'SIGTERM'] as const) process.on(sig, () => process.exit(130));
  const t = setTimeout(() => {
    console.error(`${name}: over ${seconds} s, stopping`);
    process.exit(1);
  }, seconds * 1000);
  t.unref();
  return t;
}

export const loadAverage = (): string => readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');

/** The conditions line printed above every table. */
export function conditions(): string {
  let commit = '?';
  try {
    commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { stdio: ['ignore', 'pipe', 'ignore'] })
      .toString()
      .trim();
  } catch {
    // not a git checkout
  }
  return `${new Date().toISOString()}, commit ${commit}, node ${process.version}, load average ${loadAverage()}`;
}

/** Commands clients send to Redis (MONITOR; commands run inside scripts and the INFO/MONITOR of this script left out). */
export interface SentCommands {
  readonly byName: ReadonlyMap<string, number>;
  stop(): void;
}

export async function watchSent(url: string): Promise<SentCommands> {
  const conn = new Redis(url, { maxRetriesPerRequest: 1 });
  const mon = await conn.monitor();
  const byName = new Map<string, number>();
  mon.on('monitor', (_time: string, args: string[], source: string) => {
    const name = String(args[0]).toLowerCase();
    if (source === 'lua' || name === 'info' || name === 'monitor') return;
    byName.set(name, (byName.get(name) ?? 0) + 1);
  });
  return {
    byName,
    stop: () => {
      mon.disconnect();
      conn.disconnect();
    },
  };
}

/**
 * A reading of Redis's own counts: `ran:<cmd>` = calls Redis executed (INFO commandstats, the commands
 * scripts run included; INFO left out), `sent:<cmd>` and `sent` = the commands clients sent (MONITOR).
 */
export async function commandCounts(admin: Redis, sent: SentCommands): Promise<Map<string, number>> {
  // MONITOR lines arrive after the commands run: let the ones before this reading land
  await new Promise((r) => setTimeout(r, 100));
  const text = String(await admin.call('INFO', 'commandstats'));
  const m = new Map<string, number>();
  for (const [, c, n] of text.matchAll(/cmdstat_([\w|]+):calls=(\d+)/g)) if (c !== 'info') m.set(`ran:${c}`, Number(n));
  let total = 0;
  for (const [c, n] of sent.byName) {
    m.set(`sent:${c}`, n);
    total += n;
  }
  m.set('sent', total);
  return m;
}

/** `after − before` per count. */
export function commandDelta(before: Map<string, number>, after: Map<string, number>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [c, n] of after) {
    const d = n - (before.get(c) ?? 0);
    if (d > 0) out[c] = d;
  }
  return out;
}

/** A number with `digits` significant decimals, for the tables. */
export const fmt = (x: number, digits = 2): string => (Number.isFinite(x) ? x.toFixed(digits) : '–');

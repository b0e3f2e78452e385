/**
 * The shards of a sharded config (contract/config-shards.ts) as a reader holds them: for each index, only
 * the shards whose SHA-256 changed are read (GET by name, 8 at a time) and validated; the config is
 * assembled once every shard the index lists is held at the listed SHA-256, so a change spanning shards
 * applies at once or not at all. A shard not there yet or not matching (written after the index was read,
 * edited by hand) is read again with backoff until it matches or a newer index replaces this one; a shard
 * that matches the index but does not validate refuses the index (the previous config keeps serving).
 */
import { CONFIG_MAP_KEY, ConfigMapData, parseCompiledConfig } from '../../contract/config-schema.js';
import { assembleShards, sha256Of, type ShardIndex } from '../../contract/config-shards.js';
import type { CompiledConfig } from '../../contract/config.js';
import { backoffDelay } from '../../lib/backoff.js';

const PARALLEL_READS = 8;
const RETRY_MAX_MS = 30_000;

export interface ShardSetOptions {
  /** Reads a ConfigMap of the namespace by name (undefined: it does not exist). */
  read(name: string): Promise<unknown>;
  /** A complete, valid config; `ms`: the time spent reading, validating and assembling shards. */
  onConfig(config: CompiledConfig, shardsRead: number, ms: ShardTimings): void;
  /** The index cannot apply (the reason names the shard and the rule); the previous config stays. */
  onRefused(reason: string): void;
  /** A shard could not be read or did not match yet; retried after `retryInMs`. */
  onWaiting?(reason: string, retryInMs: number): void;
}

export interface ShardTimings {
  /** Reading the changed shards (wall clock, the reads in parallel). */
  read: number;
  /** Checking their SHA-256 and validating them (CPU). */
  validate: number;
  /** Putting every shard together in routing order. */
  assemble: number;
}

export class ShardSet {
  private readonly held = new Map<string, { sha256: string; config: CompiledConfig }>();
  private generation = 0;
  private timer?: NodeJS.Timeout;

  constructor(private readonly o: ShardSetOptions) {}

  /** Follows a new index (a pending one is abandoned). */
  load(index: ShardIndex): void {
    const gen = ++this.generation;
    clearTimeout(this.timer);
    void this.attempt(index, gen, 1);
  }

  /** Forgets the shards (the config went inline) and abandons a pending index. */
  clear(): void {
    this.generation++;
    clearTimeout(this.timer);
    this.held.clear();
  }

  stop(): void {
    this.clear();
  }

  private async attempt(index: ShardIndex, gen: number, attempt: number): Promise<void> {
    const missing = index.shards.filter((s) => this.held.get(s.name)?.sha256 !== s.sha256);
    const waiting: string[] = [];
    let refused: string | undefined;
    let next = 0;
    const t0 = performance.now();
    let validateMs = 0;
    const worker = async (): Promise<void> => {
      for (let i = next++; i < missing.length && gen === this.generation && !refused; i = next++) {
        const want = missing[i]!;
        let text: string | undefined;
        try {
          const cm = ConfigMapData.safeParse(await this.o.read(want.name));
          text = cm.success ? (cm.data?.data?.[CONFIG_MAP_KEY] ?? undefined) : undefined;
        } catch (e) {
          waiting.push(`${want.name}: ${(e as Error).message}`);
          continue;
        }
        const tv = performance.now();
        if (text === undefined || sha256Of(text) !== want.sha256) {
          waiting.push(`${want.name}: ${text === undefined ? 'not there' : 'content differs from the index'}`);
          continue;
        }
        const r = parseCompiledConfig(text);
        validateMs += performance.now() - tv;
        if (!r.ok) refused = `${want.name}: ${r.message}`;
        else this.held.set(want.name, { sha256: want.sha256, config: r.config });
      }
    };
    await Promise.all(Array.from({ length: Math.min(PARALLEL_READS, missing.length) }, worker));
    if (gen !== this.generation) return;
    if (refused) return this.o.onRefused(refused);
    if (waiting.length) {
      const delay = backoffDelay(attempt, 250, RETRY_MAX_MS);
      this.o.onWaiting?.(waiting.slice(0, 3).join('; '), delay);
      this.timer = setTimeout(() => void this.attempt(index, gen, attempt + 1), delay);
      this.timer.unref();
      return;
    }
    const tRead = performance.now();
    const listed = new Set(index.shards.map((s) => s.name));
    for (const name of this.held.keys()) if (!listed.has(name)) this.held.delete(name);
    const r = assembleShards(
      index.hash,
      index.shards.map((s) => this.held.get(s.name)!.config),
    );
    if (!r.ok) return this.o.onRefused(r.message);
    this.o.onConfig(r.config, missing.length, {
      read: Math.round(tRead - t0 - validateMs),
      validate: Math.round(validateMs),
      assemble: Math.round(performance.now() - tRead),
    });
  }
}

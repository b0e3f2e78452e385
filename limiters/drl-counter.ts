/**
 * The DRL's shared counter: per bucket, the tokens granted to gateways (leases) in sub-window slots of
 * `per / SLOTS_PER_WINDOW`. A lease asks for tokens; the counter grants `min(asked, rate − granted in
 * the trailing WINDOW_SLOTS slots)`, records them in the current slot, and answers with what the group
 * has left and when the next granted token leaves the window. A gateway gives back what it did not use
 * (a negative increment on the slot that granted it). The rate is an argument of every call, so a changed
 * limit applies at the next lease; the bucket name is the only identity, so every gateway of every group
 * counting the same bucket shares one allowance.
 *   Memory: one process (standalone without a store, unit tests).
 *   Redis: one hash per bucket (`gw:{<bucket>}:drl`, field = slot index), one script call per lease
 *   (drl-lease.lua). The bucket's sliding log in the window counts as granted, and the log counts this
 *   hash's window (sliding-log.lua): a limit drl_threshold moves between the two (N crossed it) keeps
 *   one allowance. In memory N is 1, so no limit moves.
 * Both run the same rule: one table (`test/unit/engine/drl-counter-cases.ts`) runs against the memory counter
 * in `test/unit/engine/drl.test.ts` and against Redis and Redis Cluster in `test/integration/limiters/drl-counter.test.ts`.
 */
import type { Clock } from '../lib/clock.js';
import type { StoreClient } from '../lib/store/redis.js';
import { defineScript, luaScript, type ScriptRunner } from '../lib/store/scripts.js';
import { storeKeys } from '../contract/store-keys.js';
import type { MaybePromise } from './types.js';

/** Slots in one `per`: a lease is counted at slot precision. */
export const SLOTS_PER_WINDOW = 40;
/**
 * Two windows bound the grants. Any SLOTS_PER_WINDOW consecutive slots hold at most `rate`: a grant stops
 * counting there at most `per` after it was made (its slot began before it), so a demand that comes back
 * exactly `per` later (a client paced at the rate, gateways asking in step) finds its token again. Any
 * WINDOW_SLOTS consecutive slots hold at most `rate + over`, where `over` (an argument, 0 by default) is
 * the few tokens the upper bound's margin can spare (`overOf`): with over = 0 a grant is counted for
 * WINDOW_SLOTS slots, at least `per` after it whichever part of its slot it was made in.
 */
export const WINDOW_SLOTS = SLOTS_PER_WINDOW + 1;
/**
 * Slots a lease may be spent in: the slot that granted it and the next LEASE_SLOTS − 1. Admissions in any
 * span of 3 × per fall in at most 3 × SLOTS_PER_WINDOW + 1 slots and come from grants of at most
 * 3 × SLOTS_PER_WINDOW + LEASE_SLOTS = 3 × WINDOW_SLOTS consecutive slots, so they are at most
 * 3 × (rate + over). The price: beyond `over`, a grant is counted for up to WINDOW_SLOTS slots, so a window
 * spent in a burst frees again after `per` + 1/40 of it (a long demand ≥ rate admits ≥ rate × 40/41 per
 * `per`; the worst window of `per` at demand D × rate, ≥ rate × (1 − D / 40)).
 */
export const LEASE_SLOTS = 3;
/**
 * A long lease (one that asks to live longer than LEASE_SLOTS, for a gateway whose demand would let a short
 * one expire unspent) is recorded in the slot LEASE_SLOTS − 1 before its last one, a future slot, so it is
 * counted from its grant until WINDOW_SLOTS slots after it may last be spent. It is granted only while the
 * tokens recorded in future slots stay within rate / LONG_SHARE_DIVISOR: a span of 3 × per then admits at
 * most 3 × rate + rate / LONG_SHARE_DIVISOR (the short leases' 3 × rate, plus long tokens recorded after the
 * span, all counted at once just after it).
 */
export const LONG_SHARE_DIVISOR = 20;

/**
 * The tokens beyond `rate` that WINDOW_SLOTS slots may hold, within the upper bound of docs/contract.md#drl-bounds: over any
 * 3 × per, 3 × (rate + over) + the long share ≤ 1.1 × 3 × rate, + 1 per gateway when rate < N (N: the
 * gateways the limiter knows of). At most what a demand at the rate asks for in one slot (rate / 40, at
 * least 1): enough for a paced demand to find its token back a window later, no more.
 */
export function overOf(rate: number, gateways: number): number {
  const r = Math.max(0, Math.floor(rate));
  const bound = Math.floor((33 * r) / 10) + (r < gateways ? gateways : 0);
  const spare = Math.floor((bound - Math.floor(r / LONG_SHARE_DIVISOR)) / 3) - r;
  return Math.max(0, Math.min(spare, Math.ceil(r / SLOTS_PER_WINDOW)));
}

/**
 * An exact window's `over` (a window in slots of 1 ms, its wide window longer by the lateness it allows for,
 * drl.ts's exactWindows): what the margin of docs/contract.md#drl-bounds spares beyond 3 × rate, ⌊1.1 × 3 × rate⌋ − 3 × rate — 0 for
 * rates 1–3, 1 for 4–6, 2 for 7–9. A span of 3 × per and up to that lateness more lies in one wide window
 * and two windows, so it holds at most 3 × rate + over grants: admissions reaching the upstream up to that
 * much late stay within the bound, and a demand paced at the rate finds its token back exactly `per` later.
 */
export function exactOverOf(rate: number): number {
  const r = Math.max(0, Math.floor(rate));
  return Math.floor((33 * r) / 10) - 3 * r;
}

/** A call's windows in slots: the window of `per` and the wide one (defaults: SLOTS_PER_WINDOW, WINDOW_SLOTS). */
export function windowsOfCall(c: LeaseCall): { window: number; wide: number } {
  return { window: c.window ?? SLOTS_PER_WINDOW, wide: c.wide ?? WINDOW_SLOTS };
}

/** Slot length (ms, whole): SLOTS_PER_WINDOW slots cover at least `per`. */
export function slotMsOf(per: number): number {
  return Math.max(1, Math.ceil((per * 1000) / SLOTS_PER_WINDOW));
}

export interface LeaseAnswer {
  /** Tokens granted, recorded in `slot`: they may be spent until (slot + LEASE_SLOTS) × slotMs. */
  granted: number;
  slot: number;
  /** Tokens of the window no gateway holds yet, after this grant. */
  left: number;
  /** ms until the oldest counted grant leaves the window (0 while tokens are left). */
  nextFreeMs: number;
}

export interface LeaseCall {
  asked: number;
  rate: number;
  slotMs: number;
  now: number;
  /** Slots the lease may be spent in from the current one: LEASE_SLOTS (short), or more (long, granted within the long share). */
  life: number;
  /** Give back `back` unused tokens granted in `backSlot` first (0 = nothing to give back). */
  backSlot: number;
  back: number;
  /** Tokens beyond `rate` the wide window may hold (`overOf`; absent = 0). */
  over?: number;
  /**
   * Slots in the window of `per` (absent: SLOTS_PER_WINDOW), and in the wide window (absent: WINDOW_SLOTS).
   * An exact window (a small rate, slots of 1 ms) has both at per in ms: a grant counts for exactly `per`.
   */
  window?: number;
  wide?: number;
  /**
   * Record a short lease this many slots after the current one (absent = 0). It is counted from now all the
   * same, so it only holds its tokens longer: a bucket's first lease on a gateway, in an exact window, makes
   * room for a first admission that reaches the upstream late (a cold connection and code path).
   */
  delay?: number;
  /**
   * The span window (ms, slots of 1 ms; absent or 0: none): an exact window's 3 × per, counted on the
   * admissions' upstream times rather than on the grants' slots. Each grant also leaves a span record at
   * `now + late` (a bound of when its admissions reach the upstream), which the gateway moves (`moves`)
   * once it knows better; the span window holds at most rate + over of them, and `wide` then bounds the
   * grant slots like the window of `per`.
   */
  span?: number;
  late?: number;
  /** Span records to move first: flat triples [from ms, to ms (0: drop), tokens]. */
  moves?: readonly number[];
}

export interface LeaseCounter {
  lease(bucket: string, c: LeaseCall): MaybePromise<LeaseAnswer>;
  reset(bucket: string): MaybePromise<void>;
  /** Drop what this process holds of a bucket (the memory counter's slots; the store's expire by themselves). */
  forget(bucket: string): void;
}

/**
 * One bucket in process: [slotMs, wide, slot, tokens, slot, tokens, …], a handful of pairs at most. A plain
 * array held directly by the counter's map, with the slot length and the wide window first so the
 * bucket's expiry can be computed when the map is swept: no wrapper object or boxed expiry per bucket (a limit_by gateway holds
 * max_client_buckets of them; a Map per bucket cost ~300 B of heap, an expiring-map entry ~56 B).
 */
type SlotCounts = number[];
/** Index of the first (slot, tokens) pair. */
const PAIRS = 2;

/** Adds `n` (may be negative) to a slot's count; a count that falls to 0 or below is removed. */
function addTo(slots: SlotCounts, slot: number, n: number): void {
  for (let i = PAIRS; i < slots.length; i += 2) {
    if (slots[i] !== slot) continue;
    const v = slots[i + 1]! + n;
    if (v > 0) slots[i + 1] = v;
    else slots.splice(i, 2);
    return;
  }
  if (n > 0) slots.push(slot, n);
}

/**
 * A changed slot length (`per` edited): each slot's tokens move to the new slot holding its last ms, so
 * they stay counted at least as long as before (the script does the same).
 */
function renumber(slots: SlotCounts, slotMs: number): void {
  const was = slots[0]!;
  const pairs = slots.splice(PAIRS);
  slots[0] = slotMs;
  for (let i = 0; i < pairs.length; i += 2)
    addTo(slots, Math.floor(((pairs[i]! + 1) * was - 1) / slotMs), pairs[i + 1]!);
}

/**
 * An exact window's span records in process: [span ms, at ms, tokens, at, tokens, …] (the store's `a<ms>` fields).
 * `moves` applied, records out of the span window dropped; answers the tokens counted and the oldest
 * record (Infinity: none).
 */
function spanOn(spans: number[], c: LeaseCall, spanMs: number): { used: number; oldest: number } {
  const m = c.moves ?? [];
  for (let i = 0; i + 2 < m.length; i += 3) {
    addSpan(spans, m[i]!, -m[i + 2]!);
    if (m[i + 1]! > 0) addSpan(spans, m[i + 1]!, m[i + 2]!);
  }
  spans[0] = spanMs;
  let used = 0;
  let oldest = Infinity;
  for (let i = 1; i < spans.length;) {
    if (spans[i]! + spanMs <= c.now) {
      spans.splice(i, 2);
      continue;
    }
    used += spans[i + 1]!;
    oldest = Math.min(oldest, spans[i]!);
    i += 2;
  }
  return { used, oldest };
}

function addSpan(spans: number[], at: number, n: number): void {
  for (let i = 1; i < spans.length; i += 2) {
    if (spans[i] !== at) continue;
    const v = spans[i + 1]! + n;
    if (v > 0) spans[i + 1] = v;
    else spans.splice(i, 2);
    return;
  }
  if (n > 0) spans.push(at, n);
}

/** The rule of one call on one bucket's slot counts (shared by the memory counter; the script mirrors it). */
function leaseOn(slots: SlotCounts, c: LeaseCall, spans?: number[]): LeaseAnswer {
  const cur = Math.floor(c.now / c.slotMs);
  const { window, wide } = windowsOfCall(c);
  const low = cur - wide; // slots ≤ low have left the wide window
  const lowPer = cur - window; // slots ≤ lowPer have left the window of `per`
  if (c.back > 0 && c.backSlot > low) addTo(slots, c.backSlot, -c.back);
  let used = 0;
  let usedPer = 0;
  let future = 0;
  let oldest = Infinity;
  let oldestPer = Infinity;
  for (let i = PAIRS; i < slots.length;) {
    const s = slots[i]!;
    const n = slots[i + 1]!;
    if (s <= low) {
      slots.splice(i, 2);
      continue;
    }
    used += n;
    if (s > cur) future += n;
    if (n > 0 && s < oldest) oldest = s;
    if (s > lowPer) {
      usedPer += n;
      if (n > 0 && s < oldestPer) oldestPer = s;
    }
    i += 2;
  }
  const rate = Math.max(0, Math.floor(c.rate));
  const cap = rate + Math.max(0, Math.floor(c.over ?? 0));
  let room = Math.min(rate - usedPer, cap - used);
  const spanMs = c.span ?? 0;
  const sp = spans !== undefined && spanMs > 0 ? spanOn(spans, c, spanMs) : undefined;
  if (sp !== undefined) room = Math.min(room, cap - sp.used);
  let slot = cur + Math.max(0, Math.floor(c.delay ?? 0));
  const longRoom = Math.floor(rate / LONG_SHARE_DIVISOR) - future;
  if (c.life > LEASE_SLOTS && longRoom >= 1) {
    room = Math.min(room, longRoom);
    slot = cur + c.life - LEASE_SLOTS;
  }
  const granted = Math.max(0, Math.min(c.asked, room));
  if (granted > 0) {
    addTo(slots, slot, granted);
    if (slot < oldest) oldest = slot;
    if (slot < oldestPer) oldestPer = slot;
  }
  const leftPer = rate - usedPer - granted;
  const leftWide = cap - used - granted;
  let left = Math.max(0, Math.min(leftPer, leftWide));
  let spanFree = 0;
  if (sp !== undefined) {
    const at = c.now + Math.max(0, Math.floor(c.late ?? 0));
    if (granted > 0) {
      addSpan(spans!, at, granted);
      sp.oldest = Math.min(sp.oldest, at);
    }
    const leftSpan = cap - sp.used - granted;
    left = Math.max(0, Math.min(left, leftSpan));
    if (leftSpan <= 0 && sp.oldest !== Infinity) spanFree = Math.max(1, sp.oldest + spanMs - c.now);
  }
  let nextFreeMs = left > 0 ? 0 : nextFree(c, window, wide, leftPer, oldestPer, leftWide, oldest);
  if (left === 0 && spanFree > nextFreeMs) nextFreeMs = spanFree;
  return { granted, slot, left, nextFreeMs };
}

/** A spent window: ms until both windows have room (the oldest grant of each window that is full leaves it). */
function nextFree(
  c: LeaseCall,
  window: number,
  wide: number,
  leftPer: number,
  oldestPer: number,
  leftWide: number,
  oldest: number,
): number {
  let at = 0;
  if (leftPer <= 0 && oldestPer !== Infinity) at = (oldestPer + window) * c.slotMs;
  if (leftWide <= 0 && oldest !== Infinity) at = Math.max(at, (oldest + wide) * c.slotMs);
  return at === 0 ? 0 : Math.max(1, at - c.now);
}

/** Whether every counted slot of a bucket has left the window: its state may be dropped. */
function spentOut(slots: SlotCounts, now: number): boolean {
  let last = -Infinity;
  for (let i = PAIRS; i < slots.length; i += 2) if (slots[i]! > last) last = slots[i]!;
  return (last + slots[1]! + 1) * slots[0]! <= now;
}

/**
 * Lease calls between two sweeps of the memory counter (buckets whose slots all left the window dropped):
 * at least this many, and at least as many as buckets held, so a sweep costs O(1) per call amortised.
 */
const SWEEP_EVERY = 10_000;

export class MemoryLeaseCounter implements LeaseCounter {
  private readonly buckets = new Map<string, SlotCounts>();
  /** Exact windows' span records, by bucket (spanOn). */
  private readonly spans = new Map<string, number[]>();
  private calls = 0;

  constructor(private readonly clock: Clock) {}

  lease(bucket: string, c: LeaseCall): LeaseAnswer {
    const held = this.buckets.get(bucket);
    const { wide } = windowsOfCall(c);
    const slots = held ?? [c.slotMs, wide];
    if (slots[0] !== c.slotMs) renumber(slots, c.slotMs);
    slots[1] = wide;
    let spans: number[] | undefined;
    if ((c.span ?? 0) > 0) {
      spans = this.spans.get(bucket) ?? [c.span ?? 0];
      if (spans.length === 1) this.spans.set(bucket, spans);
    }
    const a = leaseOn(slots, c, spans);
    if (spans !== undefined && spans.length === 1) this.spans.delete(bucket);
    // a new bucket's array is kept as an exact-size copy (a pushed-to array reserves 17 elements)
    if (slots.length > PAIRS) {
      if (held === undefined) this.buckets.set(bucket, slots.slice());
    } else if (held !== undefined) this.buckets.delete(bucket);
    if (++this.calls >= SWEEP_EVERY && this.calls >= this.buckets.size) this.sweep();
    return a;
  }

  reset(bucket: string): void {
    this.buckets.delete(bucket);
    this.spans.delete(bucket);
  }

  forget(bucket: string): void {
    this.buckets.delete(bucket);
    this.spans.delete(bucket);
  }

  /** Buckets held (tests). */
  get size(): number {
    return this.buckets.size;
  }

  sweep(): void {
    this.calls = 0;
    const now = this.clock.now();
    for (const [bucket, slots] of this.buckets) if (spentOut(slots, now)) this.buckets.delete(bucket);
    for (const [bucket, spans] of this.spans) {
      let last = -Infinity;
      for (let i = 1; i < spans.length; i += 2) last = Math.max(last, spans[i]!);
      if (last + spans[0]! <= now) this.spans.delete(bucket);
    }
  }
}

/**
 * The tokens a bucket's counter hash (as HGETALL gives it) holds in the window, and when the first of them
 * leaves it (ms, Infinity: none): a limit drl_threshold moved from the DRL to the sliding log counts them
 * (sliding-log.ts's pipelined check; sliding-log.lua's `pre` is its script twin).
 */
export function drlGranted(hash: Record<string, string>, now: number): { pre: number; free: number } {
  const ms = Number(hash.ms);
  // a grant counts for the window of `per` and a slot (`p` + 1: a grant may come late in its slot), at most
  // the wide window `w` (an exact window's span window is 3 × per and more)
  const w = Number(hash.w) || WINDOW_SLOTS;
  const wide = Math.min(w, (Number(hash.p) || w) + 1);
  let pre = 0;
  let free = Infinity;
  if (!(ms > 0)) return { pre, free };
  const low = Math.floor(now / ms) - wide;
  for (const k in hash) {
    const s = Number(k);
    if (!(s > low)) continue; // `ms`, `w`, `p` are not numbers
    pre += Number(hash[k]);
    free = Math.min(free, (s + wide) * ms);
  }
  return { pre, free };
}

const LEASE_LUA = luaScript(import.meta.url, 'drl-lease.lua', { LEASE_SLOTS, LONG_SHARE_DIVISOR });

export class RedisLeaseCounter implements LeaseCounter {
  private readonly run: ScriptRunner<[number, number, number, number]>;

  constructor(private readonly redis: StoreClient) {
    this.run = defineScript(redis, 'gwDrlLease', 2, LEASE_LUA);
  }

  lease(bucket: string, c: LeaseCall): Promise<LeaseAnswer> {
    const { window, wide } = windowsOfCall(c);
    return this.run(
      [storeKeys.drl(bucket), storeKeys.log(bucket)],
      [
        Math.floor(c.asked),
        c.rate,
        c.slotMs,
        Math.floor(c.now),
        c.backSlot,
        Math.floor(c.back),
        Math.floor(c.life),
        Math.floor(c.over ?? 0),
        window,
        wide,
        Math.floor(c.delay ?? 0),
        Math.floor(c.span ?? 0),
        Math.floor(c.late ?? 0),
        ...(c.moves ?? []).map((v) => Math.floor(v)),
      ],
    ).then(([granted, left, nextFreeMs, slot]) => ({ granted, slot, left, nextFreeMs }));
  }

  async reset(bucket: string): Promise<void> {
    await this.redis.del(storeKeys.drl(bucket));
  }

  /** Nothing in process: the slots live in the store and expire with the window. */
  forget(): void {}
}

/**
 * The DRL's shared counter: per bucket, the tokens granted to gateways (leases) in sub-window slots of
 * `per / SLOTS_PER_WINDOW`. A lease asks for tokens; the counter grants `min(asked, rate − granted in
 * the trailing WINDOW_SLOTS slots)`, records them in the current slot, and answers with what the group
 * has left and when the next granted token leaves the window. A gateway gives back what it did not use
 * (a negative increment on the slot that granted it). The rate is an argument of every call, so a changed
 * limit applies at the next lease; the bucket name is the only identity, so every gateway of every group
 * counting the same bucket shares one allowance.
 *   Memory: one process (standalone without a store, unit tests).
 *   Redis: one hash per bucket (`gw:{<bucket>}:drl`, field = slot index), one script call per lease.
 * Both run the same rule (`test/unit/engine/drl-counter.test.ts` runs one table against both).
 */
import type { Clock } from '../lib/clock.js';
import { ExpiringMap } from '../lib/store/memory.js';
import type { StoreClient } from '../lib/store/redis.js';
import { defineScript, type ScriptRunner } from '../lib/store/scripts.js';
import { storeKeys } from '../contract/store-keys.js';
import type { MaybePromise } from './types.js';

/** Slots in one `per`: a lease is counted at slot precision. */
export const SLOTS_PER_WINDOW = 40;
/**
 * Slots a grant is counted in: the current one and SLOTS_PER_WINDOW before it, so a grant is counted for
 * at least `per` (the current slot may have only begun).
 */
export const WINDOW_SLOTS = SLOTS_PER_WINDOW + 1;
/**
 * Slots a lease may be spent in: the slot that granted it and the next LEASE_SLOTS − 1. Admissions in any
 * span of 3 × per fall in at most 3 × SLOTS_PER_WINDOW + 1 slots and come from grants of at most
 * 3 × SLOTS_PER_WINDOW + LEASE_SLOTS = 3 × WINDOW_SLOTS consecutive slots, so they are at most 3 × rate.
 * The price: a grant is counted for up to WINDOW_SLOTS slots, so a window spent in a burst frees again
 * after `per` + 1/40 of it (a long demand ≥ rate admits ≥ rate × 40/41 per `per`; the worst window of
 * `per` at demand D × rate, ≥ rate × (1 − D / 40)).
 */
export const LEASE_SLOTS = 3;

/** Slot length (ms, whole): SLOTS_PER_WINDOW slots cover at least `per`. */
export function slotMsOf(per: number): number {
  return Math.max(1, Math.ceil((per * 1000) / SLOTS_PER_WINDOW));
}

export interface LeaseAnswer {
  /** Tokens granted (recorded in slot floor(now / slotMs)). */
  granted: number;
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
  /** Give back `back` unused tokens granted in `backSlot` first (0 = nothing to give back). */
  backSlot: number;
  back: number;
}

export interface LeaseCounter {
  lease(bucket: string, c: LeaseCall): MaybePromise<LeaseAnswer>;
  reset(bucket: string): MaybePromise<void>;
  /** Drop what this process holds of a bucket (the memory counter's slots; the store's expire by themselves). */
  forget(bucket: string): void;
}

/** The rule of one call on one bucket's slot counts (shared by the memory counter; the script mirrors it). */
function leaseOn(slots: Map<number, number>, c: LeaseCall): LeaseAnswer {
  const cur = Math.floor(c.now / c.slotMs);
  const low = cur - WINDOW_SLOTS; // slots ≤ low have left the window
  if (c.back > 0 && c.backSlot > low) {
    const n = (slots.get(c.backSlot) ?? 0) - c.back;
    if (n > 0) slots.set(c.backSlot, n);
    else slots.delete(c.backSlot);
  }
  let used = 0;
  let oldest = Infinity;
  for (const [s, n] of slots) {
    if (s <= low) slots.delete(s);
    else {
      used += n;
      if (n > 0 && s < oldest) oldest = s;
    }
  }
  const rate = Math.max(0, Math.floor(c.rate));
  const granted = Math.max(0, Math.min(c.asked, rate - used));
  if (granted > 0) {
    slots.set(cur, (slots.get(cur) ?? 0) + granted);
    if (cur < oldest) oldest = cur;
  }
  const left = Math.max(0, rate - used - granted);
  const nextFreeMs = left > 0 || oldest === Infinity ? 0 : Math.max(1, (oldest + WINDOW_SLOTS) * c.slotMs - c.now);
  return { granted, left, nextFreeMs };
}

export class MemoryLeaseCounter implements LeaseCounter {
  private readonly buckets: ExpiringMap<Map<number, number>>;

  constructor(private readonly clock: Clock) {
    this.buckets = new ExpiringMap(clock);
  }

  lease(bucket: string, c: LeaseCall): LeaseAnswer {
    const slots = this.buckets.get(bucket, c.now) ?? new Map<number, number>();
    const a = leaseOn(slots, c);
    if (slots.size > 0) this.buckets.set(bucket, slots, c.now + (WINDOW_SLOTS + 1) * c.slotMs);
    else this.buckets.delete(bucket);
    return a;
  }

  reset(bucket: string): void {
    this.buckets.delete(bucket);
  }

  forget(bucket: string): void {
    this.buckets.delete(bucket);
  }
}

/**
 * KEYS[1] = gw:{bucket}:drl; ARGV = asked, rate, slotMs, WINDOW_SLOTS, now, backSlot, back.
 * Returns { granted, left, nextFreeMs }. Fields of slots out of the window are deleted as it reads them;
 * the key expires one slot after its last possible counted grant.
 */
const LEASE_LUA = `
local key = KEYS[1]
local asked = tonumber(ARGV[1])
local rate = math.floor(tonumber(ARGV[2]))
if rate < 0 then rate = 0 end
local slotMs = tonumber(ARGV[3])
local w = tonumber(ARGV[4])
local now = tonumber(ARGV[5])
local backSlot = tonumber(ARGV[6])
local back = tonumber(ARGV[7])
local cur = math.floor(now / slotMs)
local low = cur - w
if back > 0 and backSlot > low then
  local n = redis.call('HINCRBY', key, backSlot, -back)
  if n <= 0 then redis.call('HDEL', key, backSlot) end
end
local flat = redis.call('HGETALL', key)
local used = 0
local oldest = nil
for i = 1, #flat, 2 do
  local s = tonumber(flat[i])
  local n = tonumber(flat[i + 1])
  if s <= low then
    redis.call('HDEL', key, flat[i])
  else
    used = used + n
    if n > 0 and (oldest == nil or s < oldest) then oldest = s end
  end
end
local granted = rate - used
if asked < granted then granted = asked end
if granted < 0 then granted = 0 end
if granted > 0 then
  redis.call('HINCRBY', key, cur, granted)
  if oldest == nil or cur < oldest then oldest = cur end
end
if redis.call('EXISTS', key) == 1 then redis.call('PEXPIRE', key, (w + 1) * slotMs) end
local left = rate - used - granted
if left < 0 then left = 0 end
local nextFree = 0
if left == 0 and oldest ~= nil then
  nextFree = (oldest + w) * slotMs - now
  if nextFree < 1 then nextFree = 1 end
end
return { granted, left, nextFree }
`;

export class RedisLeaseCounter implements LeaseCounter {
  private readonly run: ScriptRunner<[number, number, number]>;

  constructor(private readonly redis: StoreClient) {
    this.run = defineScript(redis, 'gwDrlLease', 1, LEASE_LUA);
  }

  lease(bucket: string, c: LeaseCall): Promise<LeaseAnswer> {
    return this.run(
      [storeKeys.drl(bucket)],
      [Math.floor(c.asked), c.rate, c.slotMs, WINDOW_SLOTS, Math.floor(c.now), c.backSlot, Math.floor(c.back)],
    ).then(([granted, left, nextFreeMs]) => ({ granted, left, nextFreeMs }));
  }

  async reset(bucket: string): Promise<void> {
    await this.redis.del(storeKeys.drl(bucket));
  }

  /** Nothing in process: the slots live in the store and expire with the window. */
  forget(): void {}
}

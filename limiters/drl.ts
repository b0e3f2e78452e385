/**
 * Distributed rate limiter (default, docs/contract.md#algorithms): leases from a shared counter per bucket
 * (drl-counter.ts). A gateway admits while it holds leased tokens (synchronously, no store call); below
 * half of its last lease it asks for the next one in the background (one call in flight per bucket). A
 * lease is sized to the gateway's own demand over the next LEASE_HORIZON_MS (at least 1, at most
 * rate / 20 beyond the requests waiting for it), so shares follow demand: one client on one keep-alive
 * connection to one gateway of three gets the whole limit. A request finding no token waits for the
 * lease in flight (or sends one): at most one store round trip per many admitted requests. A gateway whose
 * demand would let a short lease expire unspent asks for a long one (a few of its requests, living until
 * after the next), renewed in the background when spent, so its requests do not wait either. When the
 * counter says the window is spent, the gateway refuses locally until the next slot frees (no call per
 * refused request).
 *
 * Bounds: every lease is counted in the counter's windows (any WINDOW_SLOTS slots hold at most rate + over,
 * `overOf`: what the margin of docs/contract.md#drl-bounds spares) and its unspent tokens go back, so over any 3 × per span the
 * gateways admit at most 3 × (rate + over), plus the long share (rate / LONG_SHARE_DIVISOR), from the
 * first request (the counter starts empty: no free burst at start or restart). A small rate with no token
 * to spare there is counted in an exact window instead (EXACT_BELOW): at most 3 × rate + exactOverOf(rate).
 * A dead gateway takes at most its outstanding leases with it, counted until they leave the window.
 *
 * Store unreachable: an even split over the last known peers (drl-even-split.ts), reported once through
 * `onFallback` and again when leases work again. Leased tokens still held are spent first. A request whose
 * leases keep expiring on their way (a store slower than a lease lives) while the window has room gets
 * the even split's answer too.
 * Headers: limit = the configured rate; remaining = the group's tokens at the counter's last answer plus
 * this gateway's unspent lease; Retry-After = until the counter frees the next token.
 */
import type { Clock } from '../lib/clock.js';
import type { StoreCalls } from '../lib/store/store-calls.js';
import type { LimitSpec } from '../contract/config.js';
import {
  exactOverOf,
  LEASE_SLOTS,
  overOf,
  SLOTS_PER_WINDOW,
  slotMsOf,
  type LeaseAnswer,
  type LeaseCall,
  type LeaseCounter,
} from './drl-counter.js';
import { EvenSplitLimiter, type PeerCount } from './drl-even-split.js';
import { allowanceOf, result, type Limiter, type LimitResult, type MaybePromise } from './types.js';

export type { PeerCount } from './drl-even-split.js';

/** A lease covers the gateway's demand over this long (ms; at most LEASE_SLOTS − 1 slots, so it can be spent before it expires). */
export const LEASE_HORIZON_MS = 250;
/** A lease asks for at most rate / LEASE_CAP_DIVISOR beyond its waiting requests (skewed gateways still share). */
export const LEASE_CAP_DIVISOR = 20;
/** After a failed store call, leases are tried again after this long (ms); the even split answers meanwhile. */
export const FALLBACK_RETRY_MS = 1000;
/** While the window is spent, the counter is asked again after at most this many slots (give-backs). */
export const POLL_SLOTS = 4;
/** Background sweep (expired leases given back, idle buckets forgotten), ms. */
export const SWEEP_MS = 200;
/** A gateway expecting fewer requests than this while a short lease lives asks for a long one. */
export const LONG_BELOW = 2;
/**
 * A long lease asks for LONG_REQUESTS tokens, is renewed when spent, and lives for LONG_LIFE_REQUESTS of the
 * gateway's requests (at its measured demand), so the next one is there before the next request…
 */
export const LONG_REQUESTS = 2;
export const LONG_LIFE_REQUESTS = 3;
/** …at most this long, and at most 2 × per (ms). */
export const LONG_LEASE_MAX_MS = 10_000;
/**
 * A rate below this whose slot window has no token to spare (`overOf` 0: under 10 per window, or below the
 * number of gateways) is counted in an exact window: slots of 1 ms, a grant counted for exactly `per` (as
 * the sliding log counts), leases only for the requests waiting (no prefetch). A slot window holds a grant
 * up to per/40 longer than `per`, so a demand coming back exactly `per` later (a client paced at the rate,
 * gateways asking in step) lost a request a window: more than a tenth of a rate under 10. Such a rate has no
 * long share (rate / LONG_SHARE_DIVISOR < 1).
 */
export const EXACT_BELOW = 20;
/**
 * An exact window's cushion (ms): a slot of per / 40, at most this. A request that finds the window spent
 * waits for a token freeing within HOLD_CUSHIONS of them, and a bucket's first lease on a gateway is
 * recorded a cushion ahead: the first admission of a bucket reaches the upstream 20–40 ms late (a new
 * upstream connection, code not yet compiled), and its token's next use is timed from the grant.
 */
export const CUSHION_MAX_MS = 50;
/**
 * The lateness an exact window allows for between a decision and its admission's arrival at the upstream
 * (ms, lateMs): the gateway's event loop, the proxy, the network and the upstream's own event loop — a few ms
 * on an idle machine, 100–300 ms and unevenly on a loaded one (two cores shared by several test suites).
 * The store round trip before the decision is not part of it: the span window counts each grant's
 * admissions from when the gateway made its decision (a grant answered late moves its span record).
 * The allowance is what a long demand at the rate can afford and still get LATE_LOWER × rate (the span
 * window holds 3 × rate + over per 3 × per + the allowance), at most LATE_MAX_MS: jitter does not grow with
 * `per`.
 */
export const LATE_MAX_MS = 1000;
export const LATE_LOWER = 0.93;
/**
 * In an exact window, a request that finds the window spent waits for the next token when it frees within
 * this many cushions of its arrival (holdMs: at least the span window's lateness and a cushion), and asks
 * once more: a demand paced exactly at the rate (a client, or gateways in step) arrives a hair before its
 * token frees as often as after it, and a burst that comes back a little more than `per` later finds its
 * tokens freeing as the records of 3 × per + X before leave the span window.
 */
export const HOLD_CUSHIONS = 4;

/** A hold's lease is made as of when its token freed if the timer woke at most this late (ms), else this before now. */
export const HOLD_LATE_MS = 5;

/** An exact window's cushion (ms) for a window of `perMs`. */
function cushionMs(perMs: number): number {
  return Math.min(slotMsOf(perMs / 1000), CUSHION_MAX_MS);
}

/**
 * The lateness (ms) an exact window of `perMs` allows for between a decision and the upstream (X): the most
 * for which the span window, 3 × rate + over per 3 × per + X + a cushion (the record's margin before a
 * late answer moves it), still gives a long demand LATE_LOWER × rate; at most LATE_MAX_MS. At per = 1 s:
 * 200 ms at 1–3 per window, 380 ms at 6, 439 ms at 9.
 */
export function lateMs(rate: number, perMs: number): number {
  const r = Math.max(1, Math.floor(rate));
  const afford = Math.floor(perMs * ((3 * r + exactOverOf(r)) / (LATE_LOWER * r) - 3));
  return Math.max(0, Math.min(afford - cushionMs(perMs), LATE_MAX_MS));
}

/**
 * How long a request that finds an exact window spent waits for a token that frees (ms): HOLD_CUSHIONS
 * cushions, and at least the span window's lateness and a cushion — a burst that comes back a little more
 * than `per` later finds its tokens freeing as the records of 3 × per + X before leave the span window.
 */
function holdMs(b: Lease): number {
  const c = cushionMs(b.perMs);
  return Math.max(HOLD_CUSHIONS * c, b.wideMs - 3 * Math.ceil(b.perMs) + c);
}

/**
 * An exact window's windows (ms; slots of 1 ms) for a small rate: `window` (= per) holds at most `rate`
 * grants; where there is a span window, `wide` is its 3 × per and the lateness its records allow for
 * (lateMs and a cushion): the span window holds at most 3 × rate + exactOverOf(rate) span records, each at
 * a bound of when a token's admission reaches the upstream — a grant's at its lot's end + X (windowsOf), a
 * token's moved back to its decision + X once spent (spentAt). Any span of 3 × per at the upstream then holds only admissions whose records lie in
 * one span window, so at most the bound of docs/contract.md#drl-bounds, whatever the store round trip, for
 * admissions reaching the upstream up to X after their decision. A rate of 1–3 below N keeps window = wide
 * = per and no span window: the bound's + N covers any lateness under `per` (4 × rate ≤ 3 × rate + N).
 */
export function exactWindows(rate: number, perMs: number, gateways: number): { window: number; wide: number } {
  const n = Math.ceil(perMs);
  if (rate < gateways && exactOverOf(rate) === 0) return { window: n, wide: n };
  return { window: n, wide: 3 * n + lateMs(rate, perMs) + cushionMs(perMs) };
}

/** The span window's cap beyond `rate` (the counter's `over`): 3 × rate + exactOverOf(rate) in all; 0 without a span window. */
function exactCapOver(rate: number, b: Lease): number {
  return b.wideMs > b.windowMs ? 2 * rate + exactOverOf(rate) : 0;
}

/**
 * One bucket's leases on this gateway: two lots (older, newer) of tokens with the slot that granted them.
 * A lot may be spent until slot × slotMs + lifeMs (endOf): computed, not stored, since a limit_by gateway
 * holds max_client_buckets of these (two stored expiries cost 48 B each: fields and boxed doubles).
 */
class Lease {
  t1 = 0;
  s1 = 0;
  t2 = 0;
  s2 = 0;
  /** With a span window: each lot's span record (ms, exactWindows). */
  p1 = 0;
  p2 = 0;
  /** Span records to move at the next exchange: triples [from, to (0: drop), tokens]. */
  moves: number[] | undefined = undefined;
  /** Tokens the counter had left at its last answer. */
  left = 0;
  /** The next lease is fetched when the tokens held fall to this (half of a short lease; none of a long one). */
  refill = 0;
  pending: Promise<void> | undefined = undefined;
  waiters = 0;
  /** Refuse locally until (the window is spent); a lease is tried again then. */
  pollAt = 0;
  /** When the counter frees the next token (Retry-After). */
  retryAt = 0;
  /** Requests seen since `seenSince`, and the demand estimate (requests per ms). */
  seen = 0;
  seenSince: number;
  demand = 0;
  lastSeen: number;
  /** Unused tokens owed back to the counter, granted in `backSlot`. */
  backSlot = 0;
  back = 0;

  /** The counter's slot length: per / 40, or 1 ms in an exact window. */
  readonly slotMs: number;
  /**
   * How long a lot may be spent after its slot began: LEASE_SLOTS slots of per / 40 — with a span window,
   * `per`: its tokens' admissions are counted from their decisions (a token spent late moves its record), so
   * a store answering later than a short lease lives still serves the requests waiting for it.
   */
  readonly lifeMs: number;
  /** In an exact window, until the bucket's first lease here: that lease is recorded a cushion ahead. */
  cold: boolean;

  /** `windowMs`, `wideMs`: an exact window's two windows (exactWindows), 0 for a slot window. */
  constructor(
    now: number,
    readonly perMs: number,
    readonly windowMs: number,
    readonly wideMs: number,
  ) {
    const step = slotMsOf(perMs / 1000);
    this.slotMs = wideMs > 0 ? 1 : step;
    this.lifeMs = wideMs > windowMs ? Math.max(LEASE_SLOTS * step, Math.ceil(perMs)) : LEASE_SLOTS * step;
    this.seenSince = now;
    this.lastSeen = now;
    this.cold = wideMs > 0;
  }

  /** Counted in an exact window (slots of 1 ms, the window `per` long). */
  get exact(): boolean {
    return this.wideMs > 0;
  }

  /** An exact window with a span window (exactWindows). */
  get spans(): boolean {
    return this.wideMs > this.windowMs;
  }

  /** A span record's lateness after a decision (lateMs, X). */
  get lateMs(): number {
    return this.wideMs - 3 * Math.ceil(this.perMs) - cushionMs(this.perMs);
  }

  /** The slot length of per / 40: lease lives, polls and idle spells are counted in it in either window. */
  get step(): number {
    return slotMsOf(this.perMs / 1000);
  }
}

/** The end of a lot granted in `slot`: it may be spent until then (ms). */
function endOf(slot: number, b: Lease): number {
  return slot * b.slotMs + b.lifeMs;
}

/**
 * The counter's windows of a bucket: 40 and 41 slots of per / 40, or an exact window's in slots of 1 ms —
 * the window of `per` (also its `wide`), and a span window of 3 × per counting span records: a new grant's
 * at the end of its lot's life + lateMs (no decision it serves is later), each token's moved back to its
 * decision + lateMs once spent.
 */
function windowsOf(b: Lease): { window?: number; wide?: number; span?: number; late?: number } {
  if (!b.exact) return {};
  if (!b.spans) return { window: b.windowMs, wide: b.wideMs };
  const span = 3 * Math.ceil(b.perMs);
  return { window: b.windowMs, wide: b.windowMs, span, late: b.lifeMs + b.lateMs };
}

/** A call that only gives back what a bucket owes and moves its span records (asks for nothing). */
function backCall(b: Lease, now: number): LeaseCall {
  return {
    asked: 0,
    rate: 0,
    slotMs: b.slotMs,
    now,
    life: LEASE_SLOTS,
    backSlot: b.backSlot,
    back: b.back,
    ...windowsOf(b),
  };
}

export interface DrlDeps {
  clock: Clock;
  counter: LeaseCounter;
  /** Live gateways of the group: the even split's N while the store is unreachable. */
  peers: PeerCount;
  /** The store-call policy (connection check, deadline, error report); absent for the memory counter. */
  calls?: StoreCalls;
  /** The store became unreachable (true; leases fall back to the even split) or answers again (false). */
  onFallback?: (active: boolean, e?: Error) => void;
  /** Resolves after `ms` (a request waiting for a token that frees; tests drive it with their clock). */
  sleep?: (ms: number) => Promise<void>;
}

const timerSleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, Math.max(0, ms)));

export class DrlLimiter implements Limiter {
  readonly name = 'drl';
  private readonly leases = new Map<string, Lease>();
  /** The holds in flight (a request waiting on one is not retrying a lease that expired). */
  private readonly holding = new WeakSet<Promise<void>>();
  private readonly even: EvenSplitLimiter;
  private readonly counter: LeaseCounter;
  private readonly clock: Clock;
  private readonly calls: StoreCalls | undefined;
  private readonly onFallback: (active: boolean, e?: Error) => void;
  private readonly peers: PeerCount;
  private readonly sleep: (ms: number) => Promise<void>;
  private fallbackUntil = 0;
  private degraded = false;
  private timer: NodeJS.Timeout | undefined;
  /** Store calls made (leases and give-backs), for the benchmarks. */
  calls_made = 0;

  constructor(d: DrlDeps) {
    this.clock = d.clock;
    this.counter = d.counter;
    this.calls = d.calls;
    this.even = new EvenSplitLimiter(d.clock, d.peers);
    this.onFallback = d.onFallback ?? (() => {});
    this.peers = d.peers;
    this.sleep = d.sleep ?? timerSleep;
  }

  check(bucket: string, limit: LimitSpec): MaybePromise<LimitResult> {
    const now = this.clock.now();
    const rate = allowanceOf(limit.rate);
    if (rate <= 0 || !(limit.per > 0)) return result(false, rate, 0, now, now + Math.max(1000, limit.per * 1000));
    const perMs = limit.per * 1000;
    let b = this.leases.get(bucket);
    // (slots of per / 40 longer than 1 ms; N asked only for a small rate)
    const ex =
      rate < EXACT_BELOW && perMs > SLOTS_PER_WINDOW && this.noSpare(rate)
        ? exactWindows(rate, perMs, this.peers())
        : { window: 0, wide: 0 };
    if (b === undefined || b.perMs !== perMs || b.windowMs !== ex.window || b.wideMs !== ex.wide) {
      // a new bucket, or a changed window: leases of the old slot length are dropped (they stay counted
      // until they leave the window)
      b = new Lease(now, perMs, ex.window, ex.wide);
      this.leases.set(bucket, b);
    }
    b.seen++;
    b.lastSeen = now;
    if (b.t1 > 0 && now >= endOf(b.s1, b)) this.expire(b, bucket, now);
    if (b.t1 === 0) return this.noToken(b, bucket, limit, rate, now);
    return this.admit(b, bucket, rate, now);
  }

  /** Whether a small rate's slot window would have no token to spare: below N, or `overOf` 0 (EXACT_BELOW). */
  private noSpare(rate: number): boolean {
    const n = this.peers();
    return rate < n || overOf(rate, n) === 0;
  }

  /**
   * Spends a token; below half of the last lease, the next one is asked for in the background — not after a
   * bucket's first request alone: its demand is not known yet, and a bucket seen once (one of many keys, each
   * used now and then) would only give that lease back unspent: two more store calls for one request.
   */
  private admit(b: Lease, bucket: string, rate: number, now: number): LimitResult {
    // with a span window: this token's admission is counted from now (its record moves back from the lot's)
    if (b.p1 > 0) this.spentAt(b, now);
    this.spend(b);
    if (
      b.pending === undefined &&
      b.t1 + b.t2 <= b.refill &&
      now >= b.pollAt &&
      now >= this.fallbackUntil &&
      (b.seen > 1 || b.demand > 0)
    )
      void this.lease(b, bucket, rate, now);
    return result(true, rate, Math.min(rate, b.left + b.t1 + b.t2), now, now);
  }

  private spend(b: Lease): void {
    if (--b.t1 === 0 && b.t2 > 0) this.shift(b);
  }

  private shift(b: Lease): void {
    b.t1 = b.t2;
    b.s1 = b.s2;
    b.p1 = b.p2;
    b.t2 = 0;
    b.p2 = 0;
  }

  /**
   * A token of lot 1 spent at `now`: its span record moves from the lot's (a bound of any decision the lot
   * may serve) to now + lateMs, with the next exchange (a lease, or the sweep's give-back) — an earlier
   * record, so until it lands the store counts the token longer, never shorter.
   */
  private spentAt(b: Lease, now: number): void {
    const to = now + b.lateMs;
    const m = (b.moves ??= []);
    const k = m.length - 3;
    if (k >= 0 && m[k] === b.p1 && m[k + 1] === to) m[k + 2]!++;
    else m.push(b.p1, to, 1);
  }

  /** Lots past their last slot: their tokens are owed back. */
  private expire(b: Lease, bucket: string, now: number): void {
    while (b.t1 > 0 && now >= endOf(b.s1, b)) {
      this.owe(b, bucket, b.s1, b.t1, b.p1);
      b.t1 = 0;
      b.p1 = 0;
      if (b.t2 > 0) this.shift(b);
    }
  }

  /** Unspent tokens granted in `slot` (their span record at `at`, 0: none) owed back. */
  private owe(b: Lease, bucket: string, slot: number, n: number, at: number): void {
    if (b.back > 0 && b.backSlot !== slot) this.giveBack(b, bucket);
    b.backSlot = slot;
    b.back += n;
    if (at > 0) (b.moves ??= []).push(at, 0, n);
  }

  /**
   * Lots are kept in the order they expire (lot 1 first, spent first); of three, the first to expire goes
   * back. `at`: the lot's span record (0: none); tokens added to a lot of the same slot take the later record.
   */
  private addLot(b: Lease, n: number, slot: number, bucket: string, at: number): void {
    const expires = endOf(slot, b);
    if (b.t1 > 0 && b.s1 === slot) {
      b.t1 += n;
      b.p1 = this.merge(b, b.p1, at, n, b.t1 - n);
    } else if (b.t2 > 0 && b.s2 === slot) {
      b.t2 += n;
      b.p2 = this.merge(b, b.p2, at, n, b.t2 - n);
    } else if (b.t1 === 0) {
      b.t1 = n;
      b.s1 = slot;
      b.p1 = at;
    } else if (expires < endOf(b.s1, b)) {
      if (b.t2 > 0) {
        this.owe(b, bucket, slot, n, at);
        return;
      }
      b.t2 = b.t1;
      b.s2 = b.s1;
      b.p2 = b.p1;
      b.t1 = n;
      b.s1 = slot;
      b.p1 = at;
    } else if (b.t2 === 0) {
      b.t2 = n;
      b.s2 = slot;
      b.p2 = at;
    } else {
      this.owe(b, bucket, b.s1, b.t1, b.p1);
      this.shift(b);
      if (expires < endOf(b.s1, b)) {
        b.t2 = b.t1;
        b.s2 = b.s1;
        b.p2 = b.p1;
        b.t1 = n;
        b.s1 = slot;
        b.p1 = at;
      } else {
        b.t2 = n;
        b.s2 = slot;
        b.p2 = at;
      }
    }
  }

  /** One lot's span record for tokens of two grants (records at `was` for `had`, at `at` for `n`): the later, the other moved to it. */
  private merge(b: Lease, was: number, at: number, n: number, had: number): number {
    if (was === at || at === 0 || was === 0) return Math.max(was, at);
    if (at > was) (b.moves ??= []).push(was, at, had);
    else (b.moves ??= []).push(at, was, n);
    return Math.max(was, at);
  }

  /** No local token: the even split while the store is unreachable, a local refusal while the window is spent, else a lease. */
  private noToken(b: Lease, bucket: string, limit: LimitSpec, rate: number, now: number): MaybePromise<LimitResult> {
    if (now < this.fallbackUntil) return this.even.check(bucket, limit);
    const until = b.exact ? now + holdMs(b) : 0;
    if (now < b.pollAt) {
      // the window is spent; in an exact window a request whose token frees within the hold waits for it
      if (b.retryAt > until) return this.refusal(b, rate, now);
      b.waiters++;
      return this.waitLease(b, bucket, limit, rate, b.pending ?? this.hold(b, bucket, rate, b.retryAt, until));
    }
    b.waiters++;
    if (b.pending !== undefined) return this.waitLease(b, bucket, limit, rate, b.pending);
    const p = this.lease(b, bucket, rate, now, until);
    if (p !== undefined) return this.waitLease(b, bucket, limit, rate, p);
    b.waiters--;
    return this.afterLease(b, bucket, limit, rate, this.clock.now()) ?? this.refusal(b, rate, now);
  }

  /** Spend a token if the lease brought one; the even split if the store failed; undefined = none. */
  private afterLease(b: Lease, bucket: string, limit: LimitSpec, rate: number, now: number): LimitResult | undefined {
    if (b.t1 > 0 && now >= endOf(b.s1, b)) this.expire(b, bucket, now);
    if (b.t1 > 0) return this.admit(b, bucket, rate, now);
    return now < this.fallbackUntil ? this.even.check(bucket, limit) : undefined;
  }

  /**
   * The slow path: wait for the lease in flight (this request is already counted in `waiters`); once more if
   * others took its tokens and the window is not spent.
   */
  private async waitLease(
    b: Lease,
    bucket: string,
    limit: LimitSpec,
    rate: number,
    p: Promise<void>,
  ): Promise<LimitResult> {
    const began = this.clock.now();
    for (let attempt = 0; ; attempt++) {
      try {
        await p;
      } finally {
        b.waiters--;
      }
      const now = this.clock.now();
      const r = this.afterLease(b, bucket, limit, rate, now);
      if (r !== undefined) return r;
      if (now < b.pollAt) return this.refusal(b, rate, now);
      // the window has room but three leases expired on their way (a store slower than a lease lives): for this
      // request the store is as good as unreachable, so the even split answers (as during an outage)
      // (a hold is a wait for a token that frees, not a lease that expired). A span window's lots live `per`,
      // so its leases do not expire on their way: one that brought this request nothing went to the requests
      // before it (the store answers), so it asks again while the window has room, and is refused after `per`
      if (b.spans) {
        if (now - began >= b.perMs) return this.refusal(b, rate, now);
      } else if (attempt >= 2 && !(b.pending !== undefined && this.holding.has(b.pending)))
        return this.even.check(bucket, limit);
      b.waiters++;
      const next = b.pending ?? this.lease(b, bucket, rate, now);
      if (next === undefined) {
        b.waiters--;
        return this.afterLease(b, bucket, limit, rate, this.clock.now()) ?? this.refusal(b, rate, now);
      }
      p = next;
    }
  }

  private refusal(b: Lease, rate: number, now: number): LimitResult {
    return result(false, rate, 0, now, Math.max(b.retryAt, now + 1));
  }

  /**
   * One exchange with the counter: owed tokens back, a lease sized to demand. Undefined when it answered
   * synchronously (and nothing waits). `until`: asked for waiting requests, which in an exact window wait
   * for a token that frees by then rather than be refused (0: they do not wait).
   */
  private lease(b: Lease, bucket: string, rate: number, now: number, until = 0): Promise<void> | undefined {
    const dt = now - b.seenSince;
    if (dt >= 10) {
      // the first measure is taken whole; later ones weigh by their length (time constant: the horizon)
      const weight = b.demand === 0 ? 1 : Math.min(1, dt / LEASE_HORIZON_MS);
      b.demand += weight * (b.seen / dt - b.demand);
      b.seen = 0;
      b.seenSince = now;
    }
    const shortMs = (LEASE_SLOTS - 1) * b.slotMs;
    const cap = Math.max(1, Math.ceil(rate / LEASE_CAP_DIVISOR));
    let life = LEASE_SLOTS;
    let asked = Math.max(1, b.waiters, Math.min(cap, Math.ceil(b.demand * Math.min(LEASE_HORIZON_MS, shortMs))));
    b.refill = asked / 2;
    let delay = 0;
    if (b.exact) {
      // an exact window: tokens for the requests waiting, none ahead (one would hold a token of a small rate)
      asked = Math.max(1, b.waiters - b.t1 - b.t2);
      b.refill = -1;
      if (b.cold) delay = cushionMs(b.perMs);
      b.cold = false;
    } else if (b.demand > 0 && b.demand * shortMs < LONG_BELOW && b.waiters <= 1) {
      // a short lease would expire before the next request: a long one lasts for the next few (the counter
      // grants it within its long share, else a short one)
      const maxMs = Math.min(LONG_LEASE_MAX_MS, 2 * b.perMs);
      const lifeMs = Math.min(maxMs, Math.max(LONG_LIFE_REQUESTS / b.demand, shortMs + 2 * b.slotMs));
      const expected = b.demand * lifeMs;
      life = Math.ceil(lifeMs / b.slotMs);
      // renewed when spent; a bucket seen less often than the longest lease lives gets one token and no
      // renewal (they would only expire and go back)
      asked = Math.min(cap, expected >= LONG_REQUESTS ? LONG_REQUESTS : 1);
      b.refill = expected >= 1 ? 0 : -1;
    }
    const over = b.exact ? exactCapOver(rate, b) : overOf(rate, this.peers());
    const c = {
      asked,
      rate,
      slotMs: b.slotMs,
      now,
      life,
      backSlot: b.backSlot,
      back: b.back,
      over,
      delay,
      ...windowsOf(b),
    };
    // a span record bounds the lot's last decision (its slot's end, `delay` ahead) + lateMs
    if (c.late !== undefined) c.late += delay;
    return this.exchange(b, bucket, c, until);
  }

  /** Whether a lease for waiting requests that brought fewer tokens than they are waits for the token the counter frees next, by `until`. */
  private holds(b: Lease, c: LeaseCall, a: LeaseAnswer | Error, until: number): a is LeaseAnswer {
    return (
      !(a instanceof Error) &&
      c.asked > 0 &&
      a.granted < b.waiters &&
      a.left === 0 &&
      a.nextFreeMs > 0 &&
      c.now + a.nextFreeMs <= until
    );
  }

  /**
   * Waits until the counter frees the next token, then asks once more for the requests still waiting (and
   * again while the next one frees by `until`: others may take the first). The lease is made as of the
   * moment the token frees, so a demand paced at the rate keeps its pace rather than drifting by a timer's
   * lateness every window — by at most HOLD_LATE_MS: a grant recorded earlier than its admission uses up the
   * cushion that keeps admissions measured late within the bound.
   */
  private hold(b: Lease, bucket: string, rate: number, at: number, until: number): Promise<void> {
    const h: Promise<void> = this.sleep(at - this.clock.now()).then(() => {
      if (b.pending === h) b.pending = undefined;
      if (b.waiters <= b.t1 + b.t2) return;
      return this.lease(b, bucket, rate, Math.max(at, this.clock.now() - HOLD_LATE_MS), until);
    });
    b.pending = h;
    this.holding.add(h);
    b.pollAt = 0; // requests arriving meanwhile wait with it (a burst that came a hair early)
    return h;
  }

  /**
   * After a lease for waiting requests: a hold for those it brought no token (holds), which the call waits for
   * only when it brought none — the requests it served go on, the others wait for the hold (b.pending).
   */
  private holdFor(
    b: Lease,
    bucket: string,
    c: LeaseCall,
    a: LeaseAnswer | Error,
    until: number,
  ): Promise<void> | undefined {
    if (!this.holds(b, c, a, until)) return undefined;
    const h = this.hold(b, bucket, c.rate, c.now + a.nextFreeMs, until);
    return a.granted === 0 ? h : undefined;
  }

  private giveBack(b: Lease, bucket: string): void {
    void this.exchange(b, bucket, backCall(b, this.clock.now()));
  }

  private exchange(b: Lease, bucket: string, c: LeaseCall, until = 0): Promise<void> | undefined {
    b.back = 0;
    if (b.moves !== undefined) {
      c.moves = b.moves;
      b.moves = undefined;
    }
    this.calls_made++;
    let r: MaybePromise<LeaseAnswer | Error>;
    if (this.calls === undefined) r = this.counter.lease(bucket, c);
    else {
      r = this.calls.guard<LeaseAnswer | Error>(
        () => this.counter.lease(bucket, c),
        (e) => e,
      );
    }
    if (!(r instanceof Promise)) {
      this.apply(b, bucket, c, r);
      return this.holdFor(b, bucket, c, r, until);
    }
    const p: Promise<void> = r.then((a) => {
      if (b.pending === p) b.pending = undefined;
      this.apply(b, bucket, c, a);
      return this.holdFor(b, bucket, c, a, until);
    });
    if (c.asked > 0) b.pending = p;
    return p;
  }

  private apply(b: Lease, bucket: string, c: LeaseCall, a: LeaseAnswer | Error): void {
    if (a instanceof Error) {
      // a give-back that failed is not repeated: those tokens stay counted until they leave the window
      this.fallbackUntil = c.now + FALLBACK_RETRY_MS;
      if (!this.degraded) {
        this.degraded = true;
        this.onFallback(true, a);
      }
      return;
    }
    if (this.degraded) {
      this.degraded = false;
      this.fallbackUntil = 0;
      this.onFallback(false);
    }
    if (c.asked === 0 && c.rate === 0) return; // a give-back alone says nothing of the window
    if (a.granted > 0) this.addLot(b, a.granted, a.slot, bucket, this.spanRecord(c));
    // a long lease asked, a short one granted (no long share left, or a rate under LONG_SHARE_DIVISOR): a
    // renewal in the background would hold a token the next request comes too late for, so none is made
    if (c.life > LEASE_SLOTS && a.slot === Math.floor(c.now / b.slotMs)) b.refill = -1;
    b.left = a.left;
    if (a.left === 0) {
      // spent: refuse locally until the counter frees the next token; ask again at least every POLL_SLOTS
      // slots, for tokens other gateways give back
      const wait = a.nextFreeMs > 0 ? a.nextFreeMs : b.step;
      b.pollAt = c.now + Math.min(wait, POLL_SLOTS * b.step);
      b.retryAt = c.now + wait;
    } else b.pollAt = 0;
  }

  /** Where a new lot's span record is (0: no span window): the script put it at the call's time + late. */
  private spanRecord(c: LeaseCall): number {
    return c.span === undefined || c.span <= 0 ? 0 : c.now + (c.late ?? 0);
  }

  /**
   * Expired leases given back, idle buckets forgotten (a bucket idle for a window and a slot holds no
   * lease and no block worth keeping). Run by a timer (start) or by hand (tests).
   */
  sweep(): void {
    const now = this.clock.now();
    for (const [bucket, b] of this.leases) {
      if (b.t1 > 0 && now >= endOf(b.s1, b)) this.expire(b, bucket, now);
      if ((b.back > 0 || b.moves !== undefined) && b.pending === undefined) this.giveBack(b, bucket);
      if (b.t1 === 0 && b.back === 0 && b.pending === undefined && now - b.lastSeen > b.perMs + b.step)
        this.leases.delete(bucket);
    }
  }

  /** Buckets with local lease state. */
  get size(): number {
    return this.leases.size;
  }

  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => this.sweep(), SWEEP_MS);
    this.timer.unref();
  }

  /** Stops the sweep and gives back every unspent lease (a gateway stopping cleanly leaves nothing counted). */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    const now = this.clock.now();
    const out: Promise<void>[] = [];
    for (const [bucket, b] of this.leases) {
      if (b.t1 > 0) this.owe(b, bucket, b.s1, b.t1, b.p1);
      if (b.t2 > 0) this.owe(b, bucket, b.s2, b.t2, b.p2);
      b.t1 = b.t2 = 0;
      if (b.back > 0 || b.moves !== undefined) {
        const p = this.exchange(b, bucket, backCall(b, now));
        if (p) out.push(p.catch(() => undefined));
      }
    }
    await Promise.all(out);
  }

  async reset(bucket: string): Promise<void> {
    this.leases.delete(bucket);
    await this.even.reset(bucket);
    await this.counter.reset(bucket);
  }

  /** This process's lease (its unused tokens are not given back: the window admits fewer, never more), fallback bucket, and a memory counter's slots. */
  forget(bucket: string): void {
    this.leases.delete(bucket);
    this.even.forget(bucket);
    this.counter.forget(bucket);
  }
}

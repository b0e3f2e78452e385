/**
 * Sentinel variant (`enable_sentinel_rate_limiter`): on reaching the limit a sentinel is written that
 * refuses for `per` seconds; while it exists a request is refused after one cheap read (GET of the
 * sentinel, whose value is the clock ms until which it holds). Admitted requests are written to the
 * sliding log off the request path (fire and forget; errors go to onBackgroundError); the script that
 * writes the log also writes the sentinel, atomically, when the log reaches the allowance.
 *
 * Overshoot bound (docs/limiter-engine.md, "Sentinel overshoot bound"; tested in
 * test/integration/limiters/sentinel.test.ts and test/integration/sentinel-burst.test.ts): a gateway admits
 * on the sentinel read alone only within its spare lease — of the tokens the bound spares beyond the
 * allowance (⌊1.1 × allowance⌋ − allowance), a share sized to its demand that the store grants with its
 * answers and counts for every other gateway — and at most that many between store answers (log writes in
 * flight). Beyond it, or without a lease (a gateway's first request of a bucket, or a spare of 0 below 10 per
 * window), the request is a claim: one script call that admits while the log has room, exact. So a window
 * admits at most the allowance plus the leases held, ⌊1.1 × allowance⌋, however synchronised the burst; in
 * the steady state an admitted request costs one GET on its path and its log write off it, as before. A
 * refusal is one GET, or none while the last answer said the window is full. In memory the log is written
 * inline, so it is exact.
 */
import type { Clock } from '../lib/clock.js';
import { ExpiringMap } from '../lib/store/memory.js';
import type { StoreClient } from '../lib/store/redis.js';
import { storeKeys } from '../contract/store-keys.js';
import { initialState, smoothingActive } from './smoothing.js';
import type { LimitSpec } from '../contract/config.js';
import { MemorySlidingLog, RedisLogScript, type LogWrite, type SpareAsk } from './sliding-log.js';
import { allowanceOf, result, type Limiter, type LimitResult, type SmoothingListener } from './types.js';
const { randomUUID } = process.getBuiltinModule('node:crypto');

export class MemorySentinel implements Limiter {
  readonly name = 'sentinel';
  private readonly sentinels: ExpiringMap<number>;
  private readonly log: MemorySlidingLog;

  constructor(
    private readonly clock: Clock,
    onSmoothing?: SmoothingListener,
    smoothingEnabled = true,
  ) {
    this.sentinels = new ExpiringMap(clock);
    this.log = new MemorySlidingLog(clock, onSmoothing, smoothingEnabled);
  }

  check(bucket: string, limit: LimitSpec, tentative = false): LimitResult {
    const now = this.clock.now();
    const until = this.sentinels.get(bucket, now);
    // smoothing's R counts the refusal and the allowance keeps moving (the rate unless smoothed)
    if (until !== undefined) return result(false, this.log.refuseUnlogged(bucket, limit), 0, now, until);
    const r = this.log.check(bucket, limit, tentative);
    if (r.allowed && r.remaining > 0) return r;
    // the limit is reached: the sentinel refuses for one window, so that is when one more is admitted
    const win = limit.per * 1000;
    this.sentinels.set(bucket, now + win, now + win);
    return result(r.allowed, r.limit, 0, now, now + win);
  }

  async reset(bucket: string): Promise<void> {
    this.forget(bucket);
  }

  forget(bucket: string): void {
    this.sentinels.delete(bucket);
    this.log.forget(bucket);
  }
}

export class RedisSentinel implements Limiter {
  readonly name = 'sentinel';
  private readonly script: RedisLogScript;
  /** This gateway's name in the buckets' spare leases. */
  private readonly id = randomUUID();
  /**
   * Per bucket, what the last store answer said of a full window: refuse while `n` ≥ `allowance`, until
   * `until` (a log write or claim that reached the allowance wrote the sentinel, until one window after it; a
   * claim refused says when one more is admitted). Also the count and allowance the headers start from.
   */
  private readonly last: ExpiringMap<{ n: number; allowance: number; until: number }>;
  /** Per smoothed bucket, the allowance the last script call reported (log write or recorded refusal): the headers' limit. */
  private readonly allowances: ExpiringMap<number>;
  /** Per bucket, this gateway's admissions whose log write has not landed yet. */
  private readonly inflight = new Map<string, number>();
  /** Per bucket, this gateway's spare lease and its demand there. */
  private readonly spares: ExpiringMap<Spare>;
  private readonly pending = new Set<Promise<void>>();
  private readonly smoothingEnabled: boolean;

  constructor(
    private readonly redis: StoreClient,
    private readonly clock: Clock,
    opts: { smoothingEnabled: boolean },
    onSmoothing: SmoothingListener = () => {},
    private readonly onBackgroundError: (e: Error) => void = () => {},
  ) {
    this.script = new RedisLogScript(redis, opts.smoothingEnabled, onSmoothing);
    this.smoothingEnabled = opts.smoothingEnabled;
    this.last = new ExpiringMap(clock);
    this.allowances = new ExpiringMap(clock);
    this.spares = new ExpiringMap(clock);
    // a (re)connected store may have lost its data (a restart without persistence, a failover): what the
    // last writes reported no longer mirrors its sentinels, nor its record of the spare leases held
    redis.on('ready', () => {
      this.last.clear();
      this.allowances.clear();
      this.spares.clear();
    });
  }

  async check(bucket: string, limit: LimitSpec): Promise<LimitResult> {
    const start = this.clock.now();
    const sp = this.spareOf(bucket, limit, start);
    if (!(sp.cap > 0 && start < sp.until && (this.inflight.get(bucket) ?? 0) < sp.cap))
      return this.claim(bucket, limit, sp, start);
    const until = Number((await this.redis.get(storeKeys.sentinel(bucket))) ?? 0);
    const now = this.clock.now();
    const seen = this.last.get(bucket, now);
    // the smoothed allowance as of the last script call; before any, where smoothing starts (threshold)
    const allowance = this.allowances.get(bucket, now) ?? seen?.allowance ?? this.startingAllowance(limit);
    if (until > now) return this.refused(bucket, limit, allowance, now, until);
    // The last answer this gateway saw reached the allowance: that script wrote the sentinel, until one
    // window after it. A read sent before that write but answered after it says "no sentinel"; this answers for it.
    if (seen && seen.n >= seen.allowance) return this.refused(bucket, limit, allowance, now, seen.until);
    const inflight = this.inflight.get(bucket) ?? 0;
    // Beyond its spare lease (or once the lease lived out) the store decides: a claim, exact. The admissions
    // on the sentinel read alone are what the store has not counted yet, and their sum over the gateways is
    // within the spare (docs/limiter-engine.md, "Sentinel overshoot bound").
    // …and only within what it knows is left: the count of its last answer, its own admissions since and its
    // claims on their way (a burst on one gateway stays exact)
    if (!(inflight < sp.cap && now < sp.until && (seen?.n ?? 0) + inflight + sp.claims < allowance))
      return this.claim(bucket, limit, sp, now);
    this.inflight.set(bucket, inflight + 1);
    const ask = now >= sp.until - sp.lifeMs / 2 ? this.ask(sp, now) : undefined;
    const p = this.writeLog(bucket, limit, now, sp, ask)
      .catch((e: unknown) => this.onBackgroundError(e instanceof Error ? e : new Error(String(e))))
      .finally(() => this.landed(bucket));
    this.pending.add(p);
    void p.finally(() => this.pending.delete(p));
    // the count as of the last answer, plus this gateway's admissions since (other gateways' are not known
    // until the next answer: Remaining can be high by what they admitted meanwhile)
    const remaining = allowance - (seen?.n ?? 0) - inflight - 1;
    // this request's log write reaches the allowance and writes the sentinel: the next admission is a window away
    return result(true, allowance, remaining, now, remaining > 0 ? now : now + limit.per * 1000);
  }

  /**
   * The store decides: one script call that refuses while a sentinel stands, else admits and logs while the
   * log has room (writing the sentinel when it reaches the allowance), and renews this gateway's spare lease.
   */
  private async claim(bucket: string, limit: LimitSpec, sp: Spare, now: number): Promise<LimitResult> {
    const seen = this.last.get(bucket, now);
    if (seen && seen.n >= seen.allowance) {
      const allowance = this.allowances.get(bucket, now) ?? seen.allowance;
      return this.refused(bucket, limit, allowance, now, seen.until);
    }
    const ask = this.ask(sp, now);
    let w: LogWrite;
    sp.claims++;
    try {
      w = await this.script.write(bucket, limit, now, 'claim', ask);
    } catch (e) {
      if (ask) this.lapsed(sp);
      throw e;
    } finally {
      sp.claims--;
    }
    if (ask) this.granted(sp, w);
    const win = limit.per * 1000;
    if (this.smoothingEnabled && smoothingActive(limit.smoothing))
      this.allowances.set(bucket, w.allowance, now + allowanceTtl(limit));
    if (!w.allowed) {
      // a standing sentinel (w.next its until) or a full log (w.next when one more is admitted): refused
      // here until then, without a store call
      if (w.next > now) this.last.set(bucket, { n: w.allowance, allowance: w.allowance, until: w.next }, w.next);
      return result(false, w.allowance, 0, now, Math.max(w.next, now + 1));
    }
    this.last.set(bucket, { n: w.n, allowance: w.allowance, until: now + win }, now + win);
    const remaining = w.allowance - w.n;
    // reaching the allowance wrote the sentinel: the next admission is a window away
    return result(true, w.allowance, remaining, now, remaining > 0 ? now : now + win);
  }

  /** This gateway's spare lease of a bucket, its demand counting this request. */
  private spareOf(bucket: string, limit: LimitSpec, now: number): Spare {
    const lifeMs = Math.min(SPARE_LIFE_MAX_MS, Math.max(SPARE_LIFE_MIN_MS, Math.round(limit.per * 1000)));
    let sp = this.spares.get(bucket, now);
    if (sp === undefined || sp.lifeMs !== lifeMs) {
      sp = { cap: 0, until: 0, asking: false, claims: 0, seen: 0, since: now, demand: 0, lifeMs };
    }
    sp.seen++;
    this.spares.set(bucket, sp, Math.max(sp.until, now) + lifeMs);
    return sp;
  }

  /** An ask for a spare lease (one in flight per bucket, so the store knows which lease this gateway may still use). */
  private ask(sp: Spare, now: number): SpareAsk | undefined {
    if (sp.asking) return undefined;
    sp.asking = true;
    const d = (sp.seen * 1000) / Math.max(now - sp.since, DEMAND_MIN_MS);
    sp.demand = sp.demand === 0 ? d : (sp.demand + d) / 2;
    sp.seen = 0;
    sp.since = now;
    return { id: this.id, demand: sp.demand, lifeMs: sp.lifeMs };
  }

  private granted(sp: Spare, w: LogWrite): void {
    sp.cap = w.spare;
    sp.until = w.spareUntil;
    sp.asking = false;
  }

  /** An ask with no answer: the store may have recorded a lease this gateway never heard of, so it uses none. */
  private lapsed(sp: Spare): void {
    sp.cap = 0;
    sp.until = 0;
    sp.asking = false;
  }

  /**
   * A refusal without a log write. For a smoothed limit the log script records it, off the request path:
   * it counts in smoothing's R (requests in the trailing window, refused ones included; without it R fell
   * to the admitted requests after every sentinel and the allowance stepped down under a steady load), and
   * smoothing steps with it, so the allowance keeps moving while the sentinel holds (it moved only with
   * log writes: once a window).
   */
  private refused(bucket: string, limit: LimitSpec, allowance: number, now: number, until: number): LimitResult {
    if (this.smoothingEnabled && smoothingActive(limit.smoothing)) {
      const p = this.script
        .write(bucket, limit, now, 'refused')
        .then((w) => this.allowances.set(bucket, w.allowance, now + allowanceTtl(limit)))
        .catch((e: unknown) => this.onBackgroundError(e instanceof Error ? e : new Error(String(e))));
      this.pending.add(p);
      void p.finally(() => this.pending.delete(p));
    }
    return result(false, allowance, 0, now, until);
  }

  /** The allowance a bucket this gateway has no news of starts at: the threshold when smoothed, else the rate. */
  private startingAllowance(limit: LimitSpec): number {
    const smoothed = this.smoothingEnabled && smoothingActive(limit.smoothing);
    return allowanceOf(smoothed ? initialState(limit.smoothing!, limit.rate).allowance : limit.rate);
  }

  private landed(bucket: string): void {
    const left = (this.inflight.get(bucket) ?? 1) - 1;
    if (left > 0) this.inflight.set(bucket, left);
    else this.inflight.delete(bucket);
  }

  /** Off the request path: add to the log; the script writes the sentinel when the log reaches the allowance. */
  private async writeLog(bucket: string, limit: LimitSpec, now: number, sp: Spare, ask?: SpareAsk): Promise<void> {
    let w: LogWrite;
    try {
      w = await this.script.write(bucket, limit, now, 'sentinel', ask);
    } catch (e) {
      if (ask) this.lapsed(sp);
      throw e;
    }
    if (ask) this.granted(sp, w);
    const win = limit.per * 1000;
    this.last.set(bucket, { n: w.n, allowance: w.allowance, until: now + win }, now + win);
    if (this.smoothingEnabled && smoothingActive(limit.smoothing))
      this.allowances.set(bucket, w.allowance, now + allowanceTtl(limit));
  }

  /** Resolves when every background log write started so far has finished (tests, shutdown). */
  async settled(): Promise<void> {
    while (this.pending.size) await Promise.allSettled([...this.pending]);
  }

  async reset(bucket: string): Promise<void> {
    await this.redis.del(
      storeKeys.log(bucket),
      storeKeys.smoothing(bucket),
      storeKeys.sentinel(bucket),
      storeKeys.unlogged(bucket),
      storeKeys.spare(bucket),
    );
    this.forget(bucket);
  }

  /** What the last writes reported (the store's sentinel and log stay); the in-flight count drains by itself. */
  forget(bucket: string): void {
    this.last.delete(bucket);
    this.allowances.delete(bucket);
    this.spares.delete(bucket);
  }
}

/** A gateway's spare lease of one bucket (cap tokens until `until`, 0 = none) and its demand there. */
interface Spare {
  cap: number;
  until: number;
  /** An ask is on its way (one at a time). */
  asking: boolean;
  /** This gateway's claims on their way. */
  claims: number;
  /** Requests since `since`; the demand (per s) sent with the last ask. */
  seen: number;
  since: number;
  demand: number;
  lifeMs: number;
}

/** A spare lease lives `per`, at least SPARE_LIFE_MIN_MS and at most SPARE_LIFE_MAX_MS; it is renewed past half its life. */
const SPARE_LIFE_MIN_MS = 1000;
const SPARE_LIFE_MAX_MS = 10_000;
/** Demand is measured over at least this long (ms): a burst's first ask does not read as an infinite rate. */
const DEMAND_MIN_MS = 100;

/** How long a reported allowance stands for the headers without news: a few windows (or hold-offs). */
const allowanceTtl = (limit: LimitSpec): number => Math.max(limit.per, limit.smoothing?.delay ?? 0) * 3000;

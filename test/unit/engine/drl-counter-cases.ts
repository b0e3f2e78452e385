/**
 * The DRL counter's behaviour table, run against every implementation (memory here, Redis in
 * test/integration/limiters/drl-counter.test.ts): the same cases, the same answers.
 * Limit 10 per 4 s: slots of 100 ms, a grant counted for 41 slots.
 */
import {
  LEASE_SLOTS,
  slotMsOf,
  WINDOW_SLOTS,
  type LeaseAnswer,
  type LeaseCounter,
} from '../../../limiters/drl-counter.js';
import { T0 } from './fixtures.js';

const PER = 4;
const SLOT = slotMsOf(PER); // 100 ms

export interface CounterUnderTest {
  counter: LeaseCounter;
}

/** `make` gives a counter with no state for the bucket names used (a fresh store or database). */
export function counterCases(name: string, make: () => Promise<CounterUnderTest> | CounterUnderTest): void {
  describe(`DRL lease counter (${name})`, () => {
    let c: LeaseCounter;
    let n = 0;
    let bucket = '';
    beforeEach(async () => {
      c = (await make()).counter;
      bucket = `k:drl-case-${++n}-${Math.random().toString(36).slice(2)}`;
    });
    /** A lease living `life` slots; the answer in full. */
    const leaseFor = async (
      life: number,
      asked: number,
      rate: number,
      at: number,
      back?: [slot: number, n: number],
      over?: number,
    ): Promise<LeaseAnswer> =>
      c.lease(bucket, {
        asked,
        rate,
        slotMs: SLOT,
        now: T0 + at,
        life,
        backSlot: back?.[0] ?? 0,
        back: back?.[1] ?? 0,
        over,
      });
    /** A short lease; the answer without its slot (always the current one). */
    const lease = async (
      asked: number,
      rate: number,
      at: number,
      back?: [slot: number, n: number],
      over?: number,
    ): Promise<Omit<LeaseAnswer, 'slot'>> => {
      const { slot, ...rest } = await leaseFor(LEASE_SLOTS, asked, rate, at, back, over);
      expect(slot).toBe(Math.floor((T0 + at) / SLOT));
      return rest;
    };
    const slot0 = Math.floor(T0 / SLOT);

    /** A lease of 3 per `PER` in an exact window (slots of 1 ms, window = wide = per in ms), recorded `delay` ms ahead. */
    const exact = (asked: number, at: number, delay?: number): Promise<LeaseAnswer> =>
      Promise.resolve(
        c.lease(bucket, {
          asked,
          rate: 3,
          slotMs: 1,
          now: T0 + at,
          life: LEASE_SLOTS,
          backSlot: 0,
          back: 0,
          window: PER * 1000,
          wide: PER * 1000,
          delay,
        }),
      );

    test('slot length: 40 slots cover the window, whole ms', () => {
      expect(slotMsOf(4)).toBe(100);
      expect(slotMsOf(1)).toBe(25);
      expect(slotMsOf(0.001)).toBe(1);
      expect(slotMsOf(3)).toBe(75);
    });

    test('grants what is asked while the window has it, then the rest, then nothing; left follows', async () => {
      expect(await lease(4, 10, 0)).toEqual({ granted: 4, left: 6, nextFreeMs: 0 });
      expect(await lease(3, 10, 50)).toEqual({ granted: 3, left: 3, nextFreeMs: 0 });
      // the window is spent: the oldest grant (slot 0) leaves 41 slots after its slot began
      expect(await lease(5, 10, 120)).toEqual({ granted: 3, left: 0, nextFreeMs: WINDOW_SLOTS * SLOT - 120 });
      expect(await lease(1, 10, 130)).toEqual({ granted: 0, left: 0, nextFreeMs: WINDOW_SLOTS * SLOT - 130 });
    });

    test('a grant is counted for 41 slots (at least a whole window), then frees', async () => {
      expect((await lease(10, 10, 99)).granted).toBe(10);
      expect((await lease(10, 10, 40 * SLOT + 99)).granted).toBe(0); // slot 40: still counted
      expect(await lease(10, 10, 41 * SLOT)).toEqual({ granted: 10, left: 0, nextFreeMs: WINDOW_SLOTS * SLOT });
    });

    test('with `over`, a grant stops counting in the window of per after 40 slots; 41 slots hold rate + over', async () => {
      expect((await lease(10, 10, 99, undefined, 1)).granted).toBe(10); // slot 0, late in it
      expect((await lease(1, 10, 20 * SLOT, undefined, 1)).granted).toBe(0); // the window of per is full
      // slot 40: exactly per after slot 0 began, less than per after the grant; the 41 slots hold 10 + 1 at most
      expect(await lease(10, 10, 40 * SLOT, undefined, 1)).toEqual({ granted: 1, left: 0, nextFreeMs: SLOT });
      expect(await lease(10, 10, 40 * SLOT + 50, undefined, 1)).toEqual({ granted: 0, left: 0, nextFreeMs: 50 });
      // slot 41: slot 0 has left both windows; 40 slots hold the 1 of slot 40
      expect(await lease(10, 10, 41 * SLOT, undefined, 1)).toEqual({ granted: 9, left: 0, nextFreeMs: 39 * SLOT });
      // 41 slots from slot 40 hold 10; the window of per from slot 41 holds 9: the next token when slot 40 leaves it
      expect(await lease(10, 10, 80 * SLOT, undefined, 1)).toEqual({ granted: 1, left: 0, nextFreeMs: SLOT });
    });

    test('an exact window (slots of 1 ms, window = wide = per in ms): a grant counts for exactly per', async () => {
      expect(await exact(2, 7)).toEqual({ granted: 2, left: 1, nextFreeMs: 0, slot: T0 + 7 });
      expect(await exact(2, 1500)).toEqual({ granted: 1, left: 0, nextFreeMs: 2507, slot: T0 + 1500 });
      expect(await exact(1, 4006)).toEqual({ granted: 0, left: 0, nextFreeMs: 1, slot: T0 + 4006 });
      // per after the first grant, to the ms: its two tokens are free again
      expect(await exact(3, 4007)).toEqual({ granted: 2, left: 0, nextFreeMs: 1493, slot: T0 + 4007 });
      expect((await exact(1, 5500)).granted).toBe(1);
    });

    test('a delayed grant is recorded ahead: counted from now all the same, freed that much later', async () => {
      expect(await exact(2, 0, 100)).toEqual({ granted: 2, left: 1, nextFreeMs: 0, slot: T0 + 100 });
      // counted at once (the window holds 2 of 3), though recorded 100 ms ahead
      expect(await exact(2, 1)).toEqual({ granted: 1, left: 0, nextFreeMs: 4000, slot: T0 + 1 });
      // per after the grants, the one made at 1 is free; the delayed two stay counted until per after 100
      expect(await exact(3, 4050)).toEqual({ granted: 1, left: 0, nextFreeMs: 50, slot: T0 + 4050 });
      expect(await exact(3, 4100)).toEqual({ granted: 2, left: 0, nextFreeMs: 3950, slot: T0 + 4100 });
    });

    test('a span window counts span records: at the call + late, moved or dropped by the gateway', async () => {
      // 2 per 4 s; the span window (3 × per = 12 s) holds rate + over = 3 records, a grant's at now + 500
      const spanned = (asked: number, at: number, moves?: number[]): Promise<Omit<LeaseAnswer, 'slot'>> =>
        Promise.resolve(
          c.lease(bucket, {
            asked,
            rate: asked === 0 ? 0 : 2,
            slotMs: 1,
            now: T0 + at,
            life: LEASE_SLOTS,
            backSlot: 0,
            back: 0,
            over: 1,
            window: PER * 1000,
            wide: PER * 1000,
            span: 3 * PER * 1000,
            late: 500,
            moves,
          }),
        ).then(({ slot: _slot, ...rest }) => rest);
      expect(await spanned(2, 0)).toEqual({ granted: 2, left: 0, nextFreeMs: 4000 });
      // the window of per is free again; the span window has room for one (its records at 500 stay until 12,500)
      expect(await spanned(2, 4000)).toEqual({ granted: 1, left: 0, nextFreeMs: 8500 });
      // the first two tokens' records move back to 100 (their decisions + lateness, as the gateway knows them), the
      // third's is dropped (given back unspent)
      await spanned(0, 4001, [T0 + 500, T0 + 100, 2, T0 + 4500, 0, 1]);
      // two records at 100 (the span window's room: one), then none: the window of per holds the rest
      expect(await spanned(1, 12_099)).toEqual({ granted: 1, left: 0, nextFreeMs: 1 });
      expect(await spanned(2, 12_100)).toEqual({ granted: 1, left: 0, nextFreeMs: 3999 });
      // unmoved, a record holds its token until 3 × per after its time (12,599 + 12,000)
      expect(await spanned(2, 16_100)).toEqual({ granted: 1, left: 0, nextFreeMs: 8499 });
    });

    test('grants in several slots free one slot at a time (Retry-After is the oldest one)', async () => {
      await lease(3, 10, 0); // slot 0
      await lease(7, 10, 5 * SLOT); // slot 5
      expect(await lease(1, 10, 10 * SLOT)).toEqual({ granted: 0, left: 0, nextFreeMs: 31 * SLOT });
      expect(await lease(5, 10, 41 * SLOT)).toEqual({ granted: 3, left: 0, nextFreeMs: 5 * SLOT });
      expect((await lease(5, 10, 46 * SLOT)).granted).toBe(5);
    });

    test('unused tokens given back are granted again; more than the slot holds takes nothing of another slot', async () => {
      await lease(6, 10, 0);
      await lease(4, 10, SLOT);
      expect(await lease(3, 10, 2 * SLOT, [slot0, 2])).toEqual({ granted: 2, left: 0, nextFreeMs: 39 * SLOT });
      // slot 0 now holds 4 (6 − 2): giving back 100 clears it and nothing else (slot 1: 4, slot 2: 2)
      expect(await lease(10, 10, 3 * SLOT, [slot0, 100])).toEqual({ granted: 4, left: 0, nextFreeMs: 39 * SLOT });
    });

    test('a give-back alone (asked 0) and a give-back for a slot that left the window change nothing else', async () => {
      await lease(10, 10, 0);
      expect((await lease(0, 10, 41 * SLOT + 1, [slot0, 5])).granted).toBe(0);
      expect(await lease(10, 10, 41 * SLOT + 2)).toEqual({ granted: 10, left: 0, nextFreeMs: 41 * SLOT - 2 });
    });

    test('the rate is an argument: a lowered limit grants nothing until the window is below it, a raised one at once', async () => {
      await lease(8, 10, 0);
      expect((await lease(5, 6, SLOT)).granted).toBe(0);
      expect((await lease(5, 20, 2 * SLOT)).granted).toBe(5);
      expect((await lease(100, 20, 3 * SLOT)).granted).toBe(7);
    });

    test('a fractional rate counts whole tokens; rate 0 grants nothing', async () => {
      expect((await lease(10, 2.9, 0)).granted).toBe(2);
      expect((await lease(10, 0, SLOT)).granted).toBe(0);
    });

    test('a long lease is recorded in a future slot: counted from its grant until 41 slots after its last', async () => {
      // 100 per 4 s: the long share is 100 / 20 = 5 tokens in future slots
      const a = await leaseFor(20, 3, 100, 0);
      expect(a).toEqual({ granted: 3, slot: slot0 + 20 - LEASE_SLOTS, left: 97, nextFreeMs: 0 });
      // counted at once: 97 left for the others, then nothing
      expect((await lease(100, 100, SLOT)).granted).toBe(97);
      // the short grant (slot 1) leaves first; the long one 41 slots after its recorded slot
      expect(await lease(1, 100, 41 * SLOT + 1)).toEqual({ granted: 0, left: 0, nextFreeMs: SLOT - 1 });
      expect((await lease(100, 100, 42 * SLOT)).granted).toBe(97);
      expect(await lease(1, 100, 42 * SLOT + 1)).toEqual({
        granted: 0,
        left: 0,
        nextFreeMs: (20 - LEASE_SLOTS + WINDOW_SLOTS) * SLOT - (42 * SLOT + 1),
      });
      expect((await lease(100, 100, (20 - LEASE_SLOTS + WINDOW_SLOTS) * SLOT)).granted).toBe(3);
    });

    test('long leases share rate / 20 of future slots; beyond it a long ask gets a short lease', async () => {
      expect(await leaseFor(20, 4, 100, 0)).toMatchObject({ granted: 4, slot: slot0 + 17 });
      // one token of the long share left: granted long, no more
      expect(await leaseFor(30, 4, 100, SLOT)).toMatchObject({ granted: 1, slot: slot0 + 1 + 27 });
      // none left: a short lease of what was asked
      expect(await leaseFor(30, 4, 100, 2 * SLOT)).toMatchObject({ granted: 4, slot: slot0 + 2 });
      // a long lot given back frees the share
      expect(await leaseFor(20, 2, 100, 3 * SLOT, [slot0 + 17, 4])).toMatchObject({ granted: 2, slot: slot0 + 3 + 17 });
      // a rate under 20 has no long share
      expect(await leaseFor(20, 1, 19, 4 * SLOT)).toMatchObject({ granted: 1, slot: slot0 + 4 });
    });

    test('a long lease past its recorded slot is a past grant: the share counts only future slots', async () => {
      await leaseFor(10, 5, 100, 0); // slot 7, the whole long share
      expect(await leaseFor(10, 1, 100, 6 * SLOT)).toMatchObject({ granted: 1, slot: slot0 + 6 }); // still future: short
      expect(await leaseFor(10, 1, 100, 7 * SLOT)).toMatchObject({ granted: 1, slot: slot0 + 7 + 7 });
    });

    /** A lease of `asked` at another window length (`slotMs`), short. */
    const leaseIn = async (slotMs: number, asked: number, rate: number, at: number): Promise<LeaseAnswer> =>
      c.lease(bucket, { asked, rate, slotMs, now: T0 + at, life: LEASE_SLOTS, backSlot: 0, back: 0 });

    test('a longer window (per edited 4 s → 20 s): the grants made stay counted for the new window, then free', async () => {
      expect((await lease(10, 10, 0)).granted).toBe(10);
      // 500 ms slots from now on: the 10 granted in the 100 ms slot are counted in the 500 ms slot holding its end
      expect(await leaseIn(500, 0, 25, 1000)).toMatchObject({ granted: 0, left: 15 });
      expect(await leaseIn(500, 0, 25, 19_000)).toMatchObject({ left: 15 });
      expect(await leaseIn(500, 0, 25, 21_000)).toMatchObject({ left: 25 }); // 41 slots of 500 ms later: freed
    });

    test('a shorter window (per edited 20 s → 4 s): the grants made stay counted for the new window, then free', async () => {
      expect((await leaseIn(500, 10, 10, 0)).granted).toBe(10);
      expect(await lease(0, 10, 1000)).toMatchObject({ granted: 0, left: 0 });
      expect(await lease(0, 10, 4400)).toMatchObject({ left: 0 });
      expect(await lease(0, 10, 4700)).toMatchObject({ left: 10 }); // the 500 ms slot's end + 41 slots of 100 ms
    });

    test('reset forgets the bucket', async () => {
      await lease(10, 10, 0);
      await c.reset(bucket);
      expect((await lease(10, 10, 1)).granted).toBe(10);
    });
  });
}

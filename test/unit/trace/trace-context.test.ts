/** W3C Trace Context rules of lib/trace/trace-context.ts. */
import {
  boundedTracestate,
  childTraceparent,
  parentIdOf,
  propagateTrace,
  sampledOf,
  traceIdOf,
  validTraceparent,
} from '../../../lib/trace/trace-context.js';

const TRACE = '0af7651916cd43dd8448eb211c80319c';
const PARENT = 'b7ad6b7169203331';
const VALID = `00-${TRACE}-${PARENT}-01`;
const FORMAT = /^00-[0-9a-f]{32}-[0-9a-f]{16}-0[01]$/;

describe('traceparent validity (W3C §3.2)', () => {
  it.each([
    ['version 00, sampled', VALID],
    ['not sampled', `00-${TRACE}-${PARENT}-00`],
    ['a later version with extra fields', `01-${TRACE}-${PARENT}-01-extra`],
    ['a later version of exactly 55 characters', `cc-${TRACE}-${PARENT}-09`],
  ])('accepts %s', (_what, v) => expect(validTraceparent(v)).toBe(true));

  it.each([
    ['absent', undefined],
    ['empty', ''],
    ['version ff', `ff-${TRACE}-${PARENT}-01`],
    ['all-zero trace id', `00-${'0'.repeat(32)}-${PARENT}-01`],
    ['all-zero parent id', `00-${TRACE}-${'0'.repeat(16)}-01`],
    ['upper-case hex', `00-${TRACE.toUpperCase()}-${PARENT}-01`],
    ['version 00 with extra fields', `${VALID}-extra`],
    ['a later version followed by other than a dash', `01-${TRACE}-${PARENT}-01x`],
    ['short trace id', `00-${TRACE.slice(1)}-${PARENT}-01`],
    ['non-hex flags', `00-${TRACE}-${PARENT}-zz`],
    ['wrong separators', `00_${TRACE}_${PARENT}_01`],
    ['two header lines', [VALID, VALID]],
  ])('refuses %s', (_what, v) => expect(validTraceparent(v)).toBe(false));
});

describe('childTraceparent', () => {
  it('keeps the trace id and the sampled flag, with a new parent id', () => {
    const out = childTraceparent(VALID);
    expect(out).toMatch(FORMAT);
    expect(traceIdOf(out)).toBe(TRACE);
    expect(parentIdOf(out)).not.toBe(PARENT);
    expect(sampledOf(out)).toBe(true);
    expect(sampledOf(childTraceparent(`00-${TRACE}-${PARENT}-00`))).toBe(false);
    // a later version is continued as version 00
    expect(traceIdOf(childTraceparent(`01-${TRACE}-${PARENT}-01-x`))).toBe(TRACE);
  });

  it('starts a new trace for an absent or invalid header; ids differ each time', () => {
    const seen = new Set<string>();
    for (const v of [undefined, `ff-${TRACE}-${PARENT}-01`, `00-${'0'.repeat(32)}-${PARENT}-01`, 'garbage']) {
      const out = childTraceparent(v);
      expect(out).toMatch(FORMAT);
      expect(traceIdOf(out)).not.toBe(TRACE);
      seen.add(traceIdOf(out));
    }
    for (let i = 0; i < 1000; i++) seen.add(parentIdOf(childTraceparent(VALID)));
    expect(seen.size).toBe(1004);
  });
});

describe('propagateTrace (outgoing requests built by gw)', () => {
  it("continues the request's own traceparent first", () => {
    const h: Record<string, string | string[]> = { traceparent: VALID, tracestate: 'a=1' };
    propagateTrace(h, { traceparent: `00-${'1'.repeat(32)}-${PARENT}-01`, tracestate: 'b=2' });
    expect(traceIdOf(h.traceparent as string)).toBe(TRACE);
    expect(h.tracestate).toBe('a=1');
  });
  it("else the caller's, with its tracestate", () => {
    const h: Record<string, string | string[]> = {};
    propagateTrace(h, { traceparent: VALID, tracestate: 'b=2' });
    expect(traceIdOf(h.traceparent as string)).toBe(TRACE);
    expect(h.tracestate).toBe('b=2');
  });
  it('else a new trace, and a tracestate without a valid traceparent is dropped', () => {
    const h: Record<string, string | string[]> = { traceparent: 'bad', tracestate: 'a=1' };
    propagateTrace(h, { tracestate: 'b=2' });
    expect(h.traceparent).toMatch(FORMAT);
    expect(h.tracestate).toBeUndefined();
  });
});

describe('a forwarded tracestate within W3C bounds (32 members, 512 characters)', () => {
  const member = (i: number, len = 8): string => `v${i}=${'x'.repeat(len)}`;
  test('within bounds: unchanged', () => {
    const v = Array.from({ length: 32 }, (_, i) => member(i)).join(',');
    expect(boundedTracestate(v)).toBe(v);
    expect(boundedTracestate(['a=1', 'b=2'])).toBe('a=1,b=2');
  });
  test('a 12 kB tracestate is cut to at most 32 members within 512 characters, from the end', () => {
    const v = Array.from({ length: 1000 }, (_, i) => member(i)).join(',');
    const out = boundedTracestate(v)!;
    expect(out.length).toBeLessThanOrEqual(512);
    expect(out.split(',').length).toBeLessThanOrEqual(32);
    expect(out.startsWith(`${member(0)},${member(1)}`)).toBe(true);
  });
  test('members over 128 characters go first', () => {
    const big = member(99, 200);
    const v = [big, ...Array.from({ length: 40 }, (_, i) => member(i))].join(',');
    const out = boundedTracestate(v)!;
    expect(out).not.toContain('v99=');
    expect(out.split(',')[0]).toBe(member(0));
  });
  test('one member over 512 characters: no tracestate at all', () => {
    expect(boundedTracestate(member(1, 600))).toBeUndefined();
  });
  test('propagateTrace forwards the bounded tracestate', () => {
    const out: Record<string, string | string[]> = {};
    const tp = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    propagateTrace(out, { traceparent: tp, tracestate: Array.from({ length: 100 }, (_, i) => member(i)).join(',') });
    expect((out.tracestate as string).split(',').length).toBeLessThanOrEqual(32);
  });
});

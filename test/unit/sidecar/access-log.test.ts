/**
 * The access log's line (docs/contract.md#observability): the fixed-shape serialiser writes what pino would write for the same
 * record, any path survives the trip through JSON, latencies are the microsecond-rounded numbers; lines are
 * batched and still reach the file by the flush interval; a stdout that never drains drops lines instead of
 * growing the process.
 */
import { pino } from 'pino';
import {
  accessLine,
  createAccessLog,
  FLUSH_MS,
  jsonString,
  MAX_BUFFERED_BYTES,
  msText,
  roundMs,
  type AccessRecord,
} from '../../../sidecar/proxy/access-log.js';
const { mkdtempSync, openSync, readFileSync, rmSync } = process.getBuiltinModule('node:fs');
const { join } = process.getBuiltinModule('node:path');
const { tmpdir } = process.getBuiltinModule('node:os');
const { spawn } = process.getBuiltinModule('node:child_process');
const { fileURLToPath } = process.getBuiltinModule('node:url');

const record = (over: Partial<AccessRecord> = {}): AccessRecord => ({
  api_id: 'orders',
  method: 'GET',
  path: '/orders/42',
  status: 200,
  latency_ms: 1.2345678,
  upstream_latency_ms: 0.75,
  decision: 'allow',
  key: '1bd4c643',
  trace_id: '4bf92f3577b34da6a3ce929d0e0e4736',
  client_ip: '203.0.113.7',
  protocol: '1.1',
  ...over,
});

/** What pino writes for `info(r, 'access')` with the access log's options, at time `t`. */
function pinoLine(r: AccessRecord, t: number): string {
  let out = '';
  const log = pino(
    { base: { component: 'access' }, messageKey: 'msg', timestamp: () => `,"time":${t}` },
    { write: (s: string) => void (out += s) },
  );
  log.info(r, 'access');
  return out;
}

test('the line is the one pino writes for the record: same fields, same order, same values', () => {
  const t = 1_764_000_000_123;
  for (const r of [
    record(),
    record({ upstream_latency_ms: null, key: null, decision: 'api_limited', status: 429 }),
    record({ api_id: '', path: '/', trace_id: '', client_ip: '::1', latency_ms: 0 }),
  ]) {
    const rounded = {
      ...r,
      latency_ms: roundMs(r.latency_ms),
      upstream_latency_ms: r.upstream_latency_ms === null ? null : roundMs(r.upstream_latency_ms),
    };
    const mine = accessLine(r, t);
    expect(mine.endsWith('}\n')).toBe(true);
    expect(mine.split('\n')).toHaveLength(2);
    const theirs = JSON.parse(pinoLine(rounded, t)) as Record<string, unknown>;
    const parsed = JSON.parse(mine) as Record<string, unknown>;
    expect(parsed).toEqual(theirs);
    expect(Object.keys(parsed)).toEqual(Object.keys(theirs));
  }
});

test('any path, api id or address survives: quotes, backslashes, control characters, non-ASCII, lone surrogates', () => {
  const odd = [
    '/a"b',
    '/a\\b',
    '/tab\there',
    '/nl\n',
    '/\u0000\u001f\u007f',
    '/caf\u00e9/\u{1f600}',
    '/\ud800x',
    '/%22',
  ];
  for (const s of odd) {
    expect(JSON.parse(jsonString(s))).toBe(s);
    const parsed = JSON.parse(accessLine(record({ path: s, api_id: s, client_ip: s }), 1)) as AccessRecord;
    expect([parsed.path, parsed.api_id, parsed.client_ip]).toEqual([s, s, s]);
  }
});

test('latencies are JSON numbers rounded to the microsecond', () => {
  for (const ms of [0, 0.0004, 0.0005, 0.001, 0.01, 0.1, 1, 1.2345678, 12.3, 999.9999, 1234.5675, 86_400_000.5]) {
    const text = msText(ms);
    expect(text).toMatch(/^\d+(\.\d{3})?$/);
    expect(JSON.parse(text)).toBeCloseTo(roundMs(ms), 9);
  }
  for (const ms of [-1.5, NaN, Infinity, 2e9]) expect(() => JSON.parse(msText(ms)) as unknown).not.toThrow();
});

describe('writing', () => {
  let dir: string;
  beforeAll(() => (dir = mkdtempSync(join(tmpdir(), 'gw-access-'))));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  test('lines are batched, written by the flush interval, and all there after flush()', async () => {
    const file = join(dir, 'a.log');
    const log = createAccessLog(openSync(file, 'w'));
    log.write(record({ path: '/first' }));
    expect(readFileSync(file, 'utf8')).toBe(''); // waits for its batch
    const deadline = Date.now() + 5000 + FLUSH_MS;
    while (!readFileSync(file, 'utf8').includes('/first') && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 20));
    expect(readFileSync(file, 'utf8')).toContain('"path":"/first"');
    for (let i = 0; i < 5000; i++) log.write(record({ path: `/n/${i}` }));
    log.flush();
    const lines = readFileSync(file, 'utf8').trim().split('\n');
    expect(lines).toHaveLength(5001);
    expect(lines.map((l) => (JSON.parse(l) as AccessRecord).path)).toEqual([
      '/first',
      ...Array.from({ length: 5000 }, (_, i) => `/n/${i}`),
    ]);
    expect(log.dropped()).toBe(0);
  });

  test('a stdout nobody reads: lines beyond MAX_BUFFERED_BYTES are dropped and counted', async () => {
    // a pipe whose reader never reads (sleep's stdin): the pipe fills, the destination's buffer reaches its bound
    const reader = spawn('sleep', ['30'], { stdio: ['pipe', 'ignore', 'ignore'] });
    try {
      const fd = (reader.stdin as unknown as { _handle: { fd: number } })._handle.fd;
      let reported = 0;
      const log = createAccessLog(fd, (n) => (reported += n));
      const line = accessLine(record(), Date.now()).length;
      const n = Math.ceil((2 * MAX_BUFFERED_BYTES) / line);
      for (let i = 0; i < n; i++) {
        log.write(record());
        if (i % 10_000 === 0) await new Promise((r) => setImmediate(r));
      }
      await new Promise((r) => setTimeout(r, 50));
      // about half could not be held (the pipe itself holds 64 KiB of the rest)
      expect(log.dropped()).toBeGreaterThan(n / 3);
      expect(log.dropped()).toBeLessThan(n);
      expect(reported).toBe(log.dropped());
    } finally {
      reader.kill('SIGKILL');
    }
  });

  const runStalled = async (mode: 'stalled' | 'closed') => {
    const child = spawn(
      process.execPath,
      ['--expose-gc', fileURLToPath(new URL('../../helpers/stalled-access-log.js', import.meta.url)), mode],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    const code = await new Promise<number | null>((r) => child.on('exit', r));
    const report = JSON.parse(out) as { written: number; grown: number; dropped: number; reader: number };
    try {
      process.kill(report.reader, 'SIGKILL');
    } catch {
      // already gone (closed mode)
    }
    return { code, ...report };
  };

  test('a stdout nobody reads holds at most about MAX_BUFFERED_BYTES of heap, and the process still exits', async () => {
    // measured in a fresh process with a forced GC: the jest worker's own heap depends on every suite before this one
    const { code, written, grown, dropped } = await runStalled('stalled');
    // the exit's flush gives up on the stalled pipe after FLUSH_SYNC_MS (it used to retry for ever)
    expect(code).toBe(0);
    expect(written).toBeGreaterThanOrEqual(8 * MAX_BUFFERED_BYTES);
    expect(dropped).toBeGreaterThan(0);
    // unbounded, the heap would hold all it was given (8 × the bound); bounded, one buffer and change
    expect(grown).toBeLessThan(3 * MAX_BUFFERED_BYTES);
  }, 30_000);

  test('a stdout whose reader has gone (EPIPE) does not keep the process from exiting', async () => {
    const { code } = await runStalled('closed');
    expect(code).toBe(0);
  }, 30_000);
});

import { keyedThrottledLog, throttledLog } from '../../lib/log-throttle.js';

test('one line per period while the events keep coming, with the number left out since the last line', () => {
  let t = 0;
  const lines: [string, number][] = [];
  const log = throttledLog<string>(
    1000,
    (e, suppressed) => lines.push([e, suppressed]),
    () => t,
  );
  log('a'); // logged at once
  for (t = 1; t < 1000; t += 100) log('b'); // 10 counted
  t = 1000;
  log('c');
  t = 5000;
  log('d');
  expect(lines).toEqual([
    ['a', 0],
    ['c', 10],
    ['d', 0],
  ]);
});

test('keyed: each key has its own period, so one key failing does not hide another', () => {
  let t = 0;
  const lines: [string, number][] = [];
  const log = keyedThrottledLog<[string, string]>(
    1000,
    ([k]) => k,
    ([k, e], suppressed) => lines.push([`${k}:${e}`, suppressed]),
    () => t,
  );
  log(['a', '1']);
  log(['a', '2']); // counted
  log(['b', '1']); // its own first line, in the same period
  t = 1000;
  log(['a', '3']);
  log(['b', '2']);
  expect(lines).toEqual([
    ['a:1', 0],
    ['b:1', 0],
    ['a:3', 1],
    ['b:2', 0],
  ]);
});

test('keyed: past maxKeys the table starts again, bounded', () => {
  const lines: string[] = [];
  const log = keyedThrottledLog<string>(
    1000,
    (k) => k,
    (k) => lines.push(k),
    () => 0,
    2,
  );
  for (const k of ['a', 'b', 'c', 'a']) log(k);
  // 'c' cleared the table (a and b forgotten): 'a' logs again
  expect(lines).toEqual(['a', 'b', 'c', 'a']);
});

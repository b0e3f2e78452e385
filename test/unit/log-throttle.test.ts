import { throttledLog } from '../../lib/log-throttle.js';

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

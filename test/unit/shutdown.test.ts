import { afterEach, beforeEach, expect, jest, test } from '@jest/globals';
import { EventEmitter } from 'node:events';
import { onShutdown } from '../../cli/shutdown.js';
import type { Logger } from '../../lib/logger.js';

function recorder(): { logger: Logger; lines: string[] } {
  const lines: string[] = [];
  const log = (_o: object, msg: string): void => void lines.push(msg);
  return { logger: { info: log, warn: log, error: log, flush: () => undefined } as unknown as Logger, lines };
}

beforeEach(() => {
  jest.useFakeTimers();
});
afterEach(() => {
  jest.useRealTimers();
});

test('a drain that finishes exits 0', async () => {
  const { logger } = recorder();
  const signals = new EventEmitter();
  const codes: number[] = [];
  onShutdown(logger, async () => undefined, { signals, exit: (c) => codes.push(c), limitMs: 1000 });
  signals.emit('SIGTERM');
  await jest.advanceTimersByTimeAsync(0);
  expect(codes).toEqual([0]);
});

test('a shutdown that never finishes exits 1 at the limit, with a line saying so', async () => {
  const { logger, lines } = recorder();
  const signals = new EventEmitter();
  const codes: number[] = [];
  onShutdown(logger, () => new Promise<void>(() => undefined), { signals, exit: (c) => codes.push(c), limitMs: 1000 });
  signals.emit('SIGTERM');
  await jest.advanceTimersByTimeAsync(999);
  expect(codes).toEqual([]);
  await jest.advanceTimersByTimeAsync(1);
  expect(codes).toEqual([1]);
  expect(lines).toContain('shutdown did not finish in time: exiting');
});

test('a second signal while draining exits 1 at once', async () => {
  const { logger } = recorder();
  const signals = new EventEmitter();
  const codes: number[] = [];
  onShutdown(logger, () => new Promise<void>(() => undefined), { signals, exit: (c) => codes.push(c) });
  signals.emit('SIGTERM');
  signals.emit('SIGINT');
  expect(codes).toEqual([1]);
});

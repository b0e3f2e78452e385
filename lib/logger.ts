/**
 * JSON logs with pino on stdout. Redaction keeps credentials out of every line. Every logger of the
 * process writes through one destination (lib/stdout-destination.ts), flushed at exit, which a stalled or
 * closed stdout cannot keep from exiting.
 */
import { pino, type Logger } from 'pino';
import { stdoutDestination, type Destination } from './stdout-destination.js';

export type { Logger };

const LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

let stdout: Destination | undefined;
function processStdout(): Destination {
  if (stdout === undefined) {
    const { dest, flush } = stdoutDestination(1);
    process.once('exit', flush);
    stdout = dest;
  }
  return stdout;
}

export function createLogger(name: string, level = process.env.GW_LOG_LEVEL ?? 'info'): Logger {
  if (!LEVELS.includes(level))
    throw new Error(`GW_LOG_LEVEL: must be one of ${LEVELS.join(', ')} (got ${JSON.stringify(level)})`);
  return pino(
    {
      name,
      level,
      base: { component: name },
      redact: {
        paths: [
          'key',
          'secret',
          'token',
          '*.authorization',
          '*.Authorization',
          'headers.authorization',
          'headers["x-gw-authorization"]',
        ],
        censor: '[redacted]',
      },
    },
    processStdout(),
  );
}

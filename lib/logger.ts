/** JSON logs with pino on stdout. Redaction keeps credentials out of every line. */
import { pino, type Logger } from 'pino';

export type { Logger };

const LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

export function createLogger(name: string, level = process.env.GW_LOG_LEVEL ?? 'info'): Logger {
  if (!LEVELS.includes(level))
    throw new Error(`GW_LOG_LEVEL: must be one of ${LEVELS.join(', ')} (got ${JSON.stringify(level)})`);
  return pino({
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
  });
}

/** JSON logs with pino on stdout. Redaction keeps credentials out of every line. */
import { pino, type Logger } from 'pino';

export type { Logger };

export function createLogger(name: string, level = process.env.GW_LOG_LEVEL ?? 'info'): Logger {
  return pino({
    name,
    level,
    base: { component: name },
    redact: {
      paths: ['key', 'secret', 'token', '*.authorization', '*.Authorization', 'headers.authorization', 'headers["x-gw-authorization"]'],
      censor: '[redacted]',
    },
  });
}

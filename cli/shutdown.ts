/** Graceful SIGTERM/SIGINT: run the drain once, then exit 0 (1 if the drain itself failed). */
import type { Logger } from '../lib/logger.js';

export function onShutdown(logger: Logger, drainAll: () => Promise<void>): void {
  let started = false;
  const handler = (signal: string): void => {
    if (started) return;
    started = true;
    logger.info({ signal }, 'shutting down');
    drainAll().then(
      () => process.exit(0),
      (e: unknown) => {
        logger.error({ err: (e as Error).message }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.once('SIGTERM', () => handler('SIGTERM'));
  process.once('SIGINT', () => handler('SIGINT'));
}

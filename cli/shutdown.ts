/**
 * Graceful SIGTERM/SIGINT: run the drain once (in-flight requests get up to 10 s, lib/serve.ts), then exit
 * 0 (1 if the drain itself failed). A second signal of either kind while draining exits at once with 1,
 * after one log line: an operator's deliberate "stop now".
 */
import type { Logger } from '../lib/logger.js';

export function onShutdown(logger: Logger, drainAll: () => Promise<void>): void {
  let started = false;
  const handler = (signal: string): void => {
    if (started) {
      logger.warn({ signal }, 'second signal while draining: exiting now, in-flight requests are cut');
      logger.flush();
      process.exit(1);
    }
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
  process.on('SIGTERM', () => handler('SIGTERM'));
  process.on('SIGINT', () => handler('SIGINT'));
}

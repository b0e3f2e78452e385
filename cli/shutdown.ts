/**
 * Graceful SIGTERM/SIGINT: run the drain once (in-flight requests get up to 10 s, lib/serve.ts), then exit
 * 0 (1 if the drain itself failed). A second signal of either kind while draining exits at once with 1,
 * after one log line: an operator's deliberate "stop now". A shutdown that has not finished after
 * SHUTDOWN_LIMIT_MS (the listeners' drain, 10 s, and the streams', 10 s, then 5 s for the closes after them:
 * an upstream pool waiting on a call, a store that does not answer) exits 1 with a line saying so, rather
 * than running on with its listeners closed; Kubernetes' default grace period (30 s) is longer.
 */
import type { Server } from 'node:http';
import type { Logger } from '../lib/logger.js';
import { closeConnectionsFor } from '../lib/serve.js';

export const SHUTDOWN_LIMIT_MS = 25_000;

export function onShutdown(
  logger: Logger,
  drainAll: () => Promise<void>,
  o: { limitMs?: number; exit?: (code: number) => void; signals?: NodeJS.EventEmitter } = {},
): void {
  const exit = o.exit ?? ((code: number) => process.exit(code));
  const signals = o.signals ?? process;
  let started = false;
  const handler = (signal: string): void => {
    if (started) {
      logger.warn({ signal }, 'second signal while draining: exiting now, in-flight requests are cut');
      logger.flush();
      exit(1);
      return;
    }
    started = true;
    logger.info({ signal }, 'shutting down');
    const limitMs = o.limitMs ?? SHUTDOWN_LIMIT_MS;
    setTimeout(() => {
      logger.error({ signal, limit_ms: limitMs }, 'shutdown did not finish in time: exiting');
      logger.flush();
      exit(1);
    }, limitMs).unref();
    drainAll().then(
      () => exit(0),
      (e: unknown) => {
        logger.error({ err: (e as Error).message }, 'shutdown failed');
        exit(1);
      },
    );
  };
  signals.on('SIGTERM', () => handler('SIGTERM'));
  signals.on('SIGINT', () => handler('SIGINT'));
}

/** The longest drain notice: the chart's largest `drainDelaySeconds`. */
const DRAIN_NOTICE_MS = 60_000;

/**
 * The drain's advance notice for a process whose one port is public (`gw facade`, `gw webhook`), where an
 * HTTP /prestop like the sidecar's (on its metrics port) would let any caller take the pod out of its
 * Service: SIGUSR2, which the chart's preStop hook sends (`kill -s USR2 1`, then the delay's `sleep`;
 * docs/helm.md "Termination"). From it, and for at most a minute, `isDraining()` is true (the process's
 * /readyz answers 503) and every response closes its connection while the servers keep accepting: a
 * keep-alive client opens its next connection anew, which the Service sends to a pod that stays, before
 * SIGTERM's drain closes the connections still idle.
 */
export function onDrainNotice(logger: Logger, servers: Server[]): { isDraining: () => boolean } {
  let until = 0;
  process.on('SIGUSR2', () => {
    until = Date.now() + DRAIN_NOTICE_MS;
    for (const s of servers) closeConnectionsFor(s, DRAIN_NOTICE_MS);
    logger.info('preStop: not ready, closing connections after each response, then draining on SIGTERM');
  });
  return { isDraining: () => Date.now() < until };
}

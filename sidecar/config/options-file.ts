/**
 * The gateway configuration file (`--config`) of a running sidecar, followed: its content is read every
 * `pollMs` (2 s) and, when it changed, validated again (zod, as at start). A valid new file applies what can
 * change live (LIVE_OPTIONS: the limiter engine is rebuilt with them); an option that applies only at a
 * restart is named in a warn line. A file that does not validate is refused with a line naming the field,
 * and the options in force stay.
 * Reading the content (not watching the inode) follows a Kubernetes ConfigMap volume, whose kubelet
 * replaces the file by swapping the `..data` symlink: the path keeps its name, its target changes.
 */
import type { Logger } from '../../lib/logger.js';
import { loadGatewayOptions, type GatewayOptionsT } from '../../lib/options.js';
const { readFileSync } = process.getBuiltinModule('node:fs');

/** Options a running gateway takes without a restart (they only shape the limiter engine). */
export const LIVE_OPTIONS: readonly (keyof GatewayOptionsT)[] = [
  'enable_kv_rolling_limiter',
  'enable_sentinel_rate_limiter',
  'enable_non_transactional_rate_limiter',
  'enable_fixed_window_rate_limiter',
  'drl_threshold',
  'enable_rate_limit_smoothing',
  'rate_limit_response_headers',
  'kv_failure_mode',
  'kv_deadline_ms',
  'max_throttled_requests',
  'hash_keys',
  'max_client_buckets',
];

/** The options whose value differs between two validated configs. */
export function changedOptions(a: GatewayOptionsT, b: GatewayOptionsT): (keyof GatewayOptionsT)[] {
  const keys = new Set([...Object.keys(a), ...Object.keys(b)] as (keyof GatewayOptionsT)[]);
  return [...keys].filter((k) => JSON.stringify(a[k]) !== JSON.stringify(b[k])).sort();
}

export interface OptionsFileWatch {
  stop(): void;
  /** Reads the file now (tests; the timer calls it). */
  check(): void;
}

export function watchOptionsFile(o: {
  file: string;
  initial: GatewayOptionsT;
  logger: Logger;
  /** A valid change with at least one live option changed: the options to run with now. */
  apply: (next: GatewayOptionsT, live: string[]) => void;
  onRefused?: () => void;
  pollMs?: number;
}): OptionsFileWatch {
  let text = read(o.file);
  let current = o.initial;
  const check = (): void => {
    const now = read(o.file);
    if (now === undefined || now === text) return;
    text = now;
    let next: GatewayOptionsT;
    try {
      next = loadGatewayOptions(o.file);
    } catch (e) {
      o.onRefused?.();
      o.logger.error({ err: (e as Error).message }, 'gateway config file refused; keeping the options in force');
      return;
    }
    const changed = changedOptions(current, next);
    if (changed.length === 0) return;
    const live = changed.filter((k) => LIVE_OPTIONS.includes(k));
    const restart = changed.filter((k) => !LIVE_OPTIONS.includes(k));
    // the options in force: the live ones from the file, the others as they were at start
    const merged = { ...current };
    for (const k of live) (merged as Record<string, unknown>)[k] = next[k];
    current = merged;
    if (live.length) {
      o.apply(merged, live);
      o.logger.info({ applied: live }, `gateway config file changed: applied ${live.join(', ')}`);
    }
    if (restart.length)
      o.logger.warn(
        { restart_required: restart },
        `gateway config file changed: ${restart.join(', ')} cannot change live; they apply when the sidecar restarts`,
      );
  };
  const timer = setInterval(check, o.pollMs ?? 2000);
  timer.unref();
  return { stop: () => clearInterval(timer), check };
}

function read(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return undefined; // mid-swap or gone: the next poll reads it again
  }
}

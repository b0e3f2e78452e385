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
import type { KubeApi } from '../../lib/kube/api.js';
import { Informer, type ResourceRef } from '../../lib/kube/informer.js';
import { parseGatewayOptions, type GatewayOptionsT } from '../../lib/options.js';
const { readFileSync } = process.getBuiltinModule('node:fs');

const CONFIG_MAPS: ResourceRef = { group: '', version: 'v1', plural: 'configmaps', kind: 'ConfigMap' };
/** The key of the options ConfigMap that holds the file (the chart's gw-sidecar-config). */
export const OPTIONS_KEY = 'config.yaml';

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

interface FollowOptions {
  initial: GatewayOptionsT;
  logger: Logger;
  /** A valid change with at least one live option changed: the options to run with now. */
  apply: (next: GatewayOptionsT, live: string[]) => void;
  onRefused?: () => void;
  /** Applied to every validated version of the file (the process's flags that win over it: --tls-cert, --h2c). */
  override?: (o: GatewayOptionsT) => GatewayOptionsT;
}

/**
 * The change logic both sources share: `offer(text)` with the config's current text (undefined: not
 * readable now, ignored); a text seen last time is skipped, a new one validated and its live options applied.
 */
function follower(o: FollowOptions & { source: string; text: string | undefined }): (text: string | undefined) => void {
  let text = o.text;
  let current = o.initial;
  return (now) => {
    if (now === undefined || now === text) return;
    text = now;
    let next: GatewayOptionsT;
    try {
      next = parseGatewayOptions(now, o.source);
      if (o.override) next = o.override(next);
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
}

export function watchOptionsFile(o: FollowOptions & { file: string; pollMs?: number }): OptionsFileWatch {
  const offer = follower({ ...o, source: o.file, text: read(o.file) });
  const check = (): void => offer(read(o.file));
  const timer = setInterval(check, o.pollMs ?? 2000);
  timer.unref();
  return { stop: () => clearInterval(timer), check };
}

/**
 * The same file as the ConfigMap the chart writes it into (`gw-sidecar-config`, key `config.yaml`),
 * watched through the API server: a change applies within a second of the write, where the kubelet's
 * refresh of the mounted file takes up to its sync period (a minute) plus its cache's TTL. The mounted
 * file (`--config`) is what the sidecar starts with; `initialText` is its text, so an unchanged ConfigMap
 * applies nothing. A ConfigMap deleted or without the key keeps the options in force.
 */
export function watchOptionsConfigMap(
  o: FollowOptions & { api: KubeApi; namespace: string; name: string; initialText: string | undefined },
): { stop(): void } {
  const offer = follower({ ...o, source: `ConfigMap ${o.namespace}/${o.name} ${OPTIONS_KEY}`, text: o.initialText });
  const informer = new Informer({
    api: o.api,
    resource: CONFIG_MAPS,
    namespace: o.namespace,
    fieldSelector: `metadata.name=${o.name}`,
    logger: o.logger,
    onChange: (type, obj) => {
      if (type === 'delete' || obj.metadata.name !== o.name) return;
      const data = (obj as { data?: unknown }).data;
      const text = data && typeof data === 'object' ? (data as Record<string, unknown>)[OPTIONS_KEY] : undefined;
      offer(typeof text === 'string' ? text : undefined);
    },
    onError: (err, retryInMs) =>
      o.logger.warn(
        { err: err.message, retryInMs },
        'gateway config watch failed; restarting (keeping the options in force)',
      ),
  });
  informer.start();
  return { stop: () => informer.stop() };
}

function read(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return undefined; // mid-swap or gone: the next poll reads it again
  }
}

/**
 * `gw release-finalizers`: the chart's pre-delete hook (controller/release-finalizers.ts, docs/helm.md
 * "Uninstall"). Exit 0 when done (a JSON log line
 * "finalizers released" with the count per kind), 1 with one line on stderr otherwise.
 */
import { createLogger } from '../lib/logger.js';
import { loadKubeConnection } from '../lib/kube/connection.js';
import { createKubeApi } from '../lib/kube/api.js';
import { releaseFinalizers } from '../controller/release-finalizers.js';

export interface ReleaseFlags {
  kubeconfig?: string;
  controller?: string;
  namespace?: string;
  timeout: string;
}

export async function runReleaseFinalizers(flags: ReleaseFlags): Promise<void> {
  let controller: { namespace: string; name: string } | undefined;
  if (flags.controller) {
    const m = /^([a-z0-9][-a-z0-9]*)\/([a-z0-9][-a-z0-9.]*)$/.exec(flags.controller);
    if (!m) throw new Error(`--controller: expected NAMESPACE/DEPLOYMENT, got ${JSON.stringify(flags.controller)}`);
    controller = { namespace: m[1]!, name: m[2]! };
  }
  const timeout = Number(flags.timeout);
  if (!Number.isFinite(timeout) || timeout <= 0)
    throw new Error(`--timeout: expected a number of seconds > 0, got ${JSON.stringify(flags.timeout)}`);
  const logger = createLogger('release-finalizers');
  const api = createKubeApi(await loadKubeConnection(flags.kubeconfig));
  // the log line "finalizers released" carries the counts per kind
  await releaseFinalizers(
    api,
    { controller, namespace: flags.namespace || undefined, stopTimeoutMs: timeout * 1000 },
    logger,
  );
}

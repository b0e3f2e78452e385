/** The `gw_build_info` gauge (apart from lib/build-info.ts: `gw version` and the client commands load no prom-client). */
import { Gauge, type Registry } from 'prom-client';
import { buildInfo } from './build-info.js';

/** Registers `gw_build_info` in `registry`: always 1, the facts are its labels. */
export function registerBuildInfo(registry: Registry): void {
  const b = buildInfo();
  new Gauge({
    name: 'gw_build_info',
    help: 'Always 1: the labels say which gw runs (package version, Node.js version, git commit or "unknown")',
    labelNames: ['version', 'node', 'commit'] as const,
    registers: [registry],
  }).set({ version: b.version, node: b.node, commit: b.commit ?? 'unknown' }, 1);
}

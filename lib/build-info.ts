/**
 * What this gw is: the package version (package.json), the Node.js version it runs on, and the git commit
 * it was built from when the build had one (`make build` writes `dist/build-info.json` from
 * `git rev-parse HEAD`; a build without git writes no commit and still succeeds). Printed by
 * `gw version` / `gw --version`, added to every `/healthz` body and exported as the `gw_build_info` gauge
 * (lib/build-info-metric.ts; docs/observability.md).
 */
import { z } from 'zod';
const { readFileSync } = process.getBuiltinModule('node:fs');

export interface BuildInfo {
  version: string;
  node: string;
  /** The git commit of the build; absent when it was not built from a checkout. */
  commit?: string;
}

const PackageJson = z.looseObject({ version: z.string().min(1) });
const BuildFile = z.looseObject({ commit: z.string().regex(/^[0-9a-f]{7,64}$/) });

/** A JSON file next to the compiled tree, or undefined when it is missing or does not parse. */
function readJson(url: URL): unknown {
  try {
    return JSON.parse(readFileSync(url, 'utf8'));
  } catch {
    return undefined;
  }
}

let cached: BuildInfo | undefined;

/**
 * Read once. The package root is two levels above `dist/lib/build-info.js` (one above `lib/build-info.ts`
 * when the tests run the sources); the build's file is `dist/build-info.json` under it.
 */
export function buildInfo(): BuildInfo {
  if (cached) return cached;
  const root = new URL(/\/dist\/lib\/[^/]+$/.test(import.meta.url) ? '../../' : '../', import.meta.url);
  const version = PackageJson.safeParse(readJson(new URL('package.json', root))).data?.version ?? 'unknown';
  const commit = BuildFile.safeParse(readJson(new URL('dist/build-info.json', root))).data?.commit;
  cached = { version, node: process.version, ...(commit ? { commit } : {}) };
  return cached;
}

/** `gw version`'s text: one fact per line. */
export function formatBuildInfo(b: BuildInfo = buildInfo()): string {
  return `gw ${b.version}\nnode ${b.node}\ncommit ${b.commit ?? 'unknown (not built from a git checkout)'}\n`;
}

/**
 * The set of ApiDefinitions and Policies → CompiledConfig (what sidecars enforce). A bad or
 * conflicting ApiDefinition is reported and left out; the others still compile.
 */
import type { ApiDefinition, Policy } from '../../crds/kinds.js';
import type { CompiledApi, CompiledConfig, CompiledPolicy } from '../../sidecar/config/types.js';
import { compileApi } from './compile-api.js';
const { createHash } = process.getBuiltinModule('node:crypto');

export interface CompileProblem {
  kind: 'ApiDefinition' | 'Policy';
  namespace: string;
  name: string;
  message: string;
}

export function compileConfig(apis: ApiDefinition[], policies: Policy[]): { config: CompiledConfig; problems: CompileProblem[] } {
  const problems: CompileProblem[] = [];
  const compiled: CompiledApi[] = [];
  const byListen = new Map<string, CompiledApi>();
  const byId = new Map<string, CompiledApi>();
  for (const res of apis) {
    const where = { kind: 'ApiDefinition' as const, namespace: res.metadata.namespace, name: res.metadata.name };
    let api: CompiledApi;
    try {
      api = compileApi(res);
    } catch (e) {
      problems.push({ ...where, message: (e as Error).message });
      continue;
    }
    const idKey = `${api.namespace}/${api.api_id}`;
    const clash = byListen.get(api.listenPath) ?? byId.get(idKey);
    if (clash) {
      problems.push({ ...where, message: `conflicts with ApiDefinition ${clash.namespace}/${clash.name} (same listen path or api_id)` });
      continue;
    }
    byListen.set(api.listenPath, api);
    byId.set(idKey, api);
    compiled.push(api);
  }
  const pols: Record<string, CompiledPolicy> = {};
  for (const p of policies) {
    pols[`${p.metadata.namespace}/${p.metadata.name}`] = { namespace: p.metadata.namespace, name: p.metadata.name, spec: p.spec };
  }
  compiled.sort((a, b) => b.listenPath.length - a.listenPath.length || a.listenPath.localeCompare(b.listenPath));
  const body = { apis: compiled, policies: pols };
  const hash = createHash('sha256').update(JSON.stringify(body)).digest('hex').slice(0, 16);
  return { config: { hash, ...body }, problems };
}

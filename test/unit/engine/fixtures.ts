/** Builders shared by the engine tests. */
import { ManualClock } from '../../../lib/clock.js';
import { GatewayOptions, type GatewayOptionsT } from '../../../lib/options.js';
import type { StoredSession } from '../../../lib/sessions.js';
import type { KeySessionT } from '../../../crds/schemas/access-key.js';
import type { PolicySpecT } from '../../../crds/schemas/policy.js';
import type { CompiledApi, CompiledConfig, EndpointRule } from '../../../sidecar/config/types.js';
import { createEngine, type EngineDeps, type EngineSmoothingEvent, type GatewayEngine } from '../../../sidecar/engine/engine.js';
import type { Verdict } from '../../../sidecar/engine/types.js';

export const T0 = 1_700_000_040_000; // a multiple of 60 s: windows start here

export function options(o: Partial<GatewayOptionsT> = {}): GatewayOptionsT {
  return GatewayOptions.parse(o);
}

export function api(apiId: string, o: Partial<CompiledApi> = {}): CompiledApi {
  return {
    namespace: 'default',
    name: apiId,
    api_id: apiId,
    active: true,
    keyless: false,
    authHeader: 'authorization',
    listenPath: `/${apiId}/`,
    strip: true,
    endpointRules: [],
    ...o,
  };
}

export function rule(method: string, pattern: string, rate: number, per: number, id = `${method} ${pattern}`): EndpointRule {
  return { method, pattern, rate, per, id };
}

export function config(policies: Record<string, Partial<PolicySpecT>> = {}, apis: CompiledApi[] = []): CompiledConfig {
  return {
    hash: JSON.stringify(policies),
    apis,
    policies: Object.fromEntries(
      Object.entries(policies).map(([name, spec]) => [`default/${name}`, { namespace: 'default', name, spec: { active: true, ...spec } }]),
    ),
  };
}

export function session(s: KeySessionT): StoredSession {
  return { namespace: 'default', session: s };
}

export interface Harness {
  clock: ManualClock;
  engine: GatewayEngine;
  events: EngineSmoothingEvent[];
  storeErrors: Error[];
  /** Fires n checks one after the other; returns the verdict kinds. */
  fire(n: number, req: Parameters<GatewayEngine['check']>[0]): Promise<Verdict['kind'][]>;
}

export function harness(o: Partial<GatewayOptionsT> = {}, cfg: CompiledConfig = config(), deps: Partial<EngineDeps> = {}): Harness {
  const clock = new ManualClock(T0);
  const events: EngineSmoothingEvent[] = [];
  const storeErrors: Error[] = [];
  const engine = createEngine({
    options: options(o),
    clock,
    config: () => cfg,
    onSmoothingEvent: (e) => events.push(e),
    onStoreError: (e) => storeErrors.push(e),
    ...deps,
  });
  return {
    clock,
    engine,
    events,
    storeErrors,
    async fire(n, req) {
      const out: Verdict['kind'][] = [];
      for (let i = 0; i < n; i++) out.push((await engine.check(req)).kind);
      return out;
    },
  };
}

export const count = <T>(xs: T[], x: T): number => xs.filter((y) => y === x).length;

/**
 * lib/zod-shapes.ts: validating through the schema narrowed to a value's shape gives exactly the whole
 * schema's answer — the same value (fields in the same order, defaults filled) or the same error message
 * — for random resources of every kind built from valid and invalid field values, unknown fields,
 * `__proto__`, wrong types and absurd nesting.
 */
import { RESOURCE_SCHEMAS } from '../../crds/kinds.js';
import { formatZodError } from '../../lib/errors.js';
import { shapeValidator } from '../../lib/zod-shapes.js';
import { rng } from '../helpers/rng.js';

const pick = <T>(xs: readonly T[], r: () => number): T => xs[Math.floor(r() * xs.length)]!;

const HASH = 'a'.repeat(64);
const deep = (n: number): unknown => (n ? { x: deep(n - 1) } : 1);
/** Candidate values per field (valid ones first); `undefined` leaves the field out. */
const FIELDS: Record<string, Record<string, unknown[]>> = {
  metadata: {
    name: ['k-1', 'a.b', 'BAD', '', 7],
    namespace: [undefined, 'team', 3],
    annotations: [undefined, { 'gw.io/suppress-reset': 'true' }, { a: 1 }],
    labels: [undefined, { a: 'b' }],
    extra: [undefined, 'kept'],
  },
  AccessKey: {
    key_hash: [HASH, undefined, 'ABC', 12],
    secretRef: [undefined, { name: 's', key: 'k' }, { name: 's' }],
    rate: [100, undefined, 0, -1, '10', 1.5],
    per: [1, undefined, 60, 0, -3],
    quota_max: [undefined, 10, -1, 1.5],
    access_rights: [undefined, {}, { api: { api_id: 'api', api_name: 'a', versions: [] } }, { __proto__: 1 }, [1]],
    meta_data: [undefined, { a: 1, b: { c: 'd' } }, null, deep(80)],
    apply_policies: [undefined, ['p'], [''], 'p'],
    alias: [undefined, 'x', 5],
    is_inactive: [undefined, true, 'yes'],
    unknown_field: [undefined, undefined, 1],
  },
  ApiDefinition: {
    api_id: ['api', undefined, 5],
    use_keyless: [true, undefined, false, 'no'],
    proxy: [{ listen_path: '/a/', target_url: 'http://127.0.0.1:9' }, { listen_path: '/b/' }, {}, undefined, 'x'],
    global_rate_limit: [undefined, { rate: 1, per: 1 }, { rate: -5, per: 1 }],
    active: [undefined, true, 1],
    tags: [undefined, ['a'], [1]],
  },
  Policy: {
    rate: [1, undefined, -1],
    per: [1, undefined, 'x'],
    quota_max: [undefined, 5],
    access_rights: [undefined, {}, { api: { api_id: 'api' } }],
  },
  OAuthClient: {
    api_id: ['api', undefined],
    client_id: ['c', undefined, 3],
    policy_id: [undefined, 'p'],
    secretRef: [{ name: 's', key: 'k' }, undefined],
    redirect_uri: [undefined, 'http://x.test/cb', 'not a uri'],
  },
};

function randomObject(fields: Record<string, unknown[]>, r: () => number): Record<string, unknown> {
  const o: Record<string, unknown> = {};
  for (const [k, vs] of Object.entries(fields)) {
    const v = r() < 0.8 ? vs[0] : pick(vs, r); // mostly the valid value: both outcomes come often
    if (v !== undefined) o[k] = structuredClone(v);
  }
  return o;
}

function randomDoc(r: () => number): unknown {
  const kind = pick(['AccessKey', 'ApiDefinition', 'Policy', 'OAuthClient', 'Secret'] as const, r);
  if (kind === 'Secret')
    return {
      apiVersion: 'v1',
      kind,
      metadata: randomObject(FIELDS.metadata!, r),
      ...(r() < 0.7 ? { stringData: { k: pick(['raw', 5], r) } } : {}),
      ...(r() < 0.5 ? { data: { k: pick(['cmF3', '!!'], r) } } : {}),
    };
  const doc: Record<string, unknown> = {
    apiVersion: r() < 0.95 ? 'gw.io/v1alpha1' : 'v9',
    kind,
    metadata: r() < 0.95 ? randomObject(FIELDS.metadata!, r) : 'meta',
    spec: r() < 0.97 ? randomObject(FIELDS[kind]!, r) : [],
  };
  if (r() < 0.05) doc.status = { conditions: [] };
  if (r() < 0.03) Object.defineProperty(doc, '__proto__', { value: {}, enumerable: true });
  return doc;
}

test('the narrowed schema of each shape answers as the whole schema: same value, same error', () => {
  const r = rng(26);
  const validators = Object.fromEntries(Object.entries(RESOURCE_SCHEMAS).map(([k, s]) => [k, shapeValidator(s)]));
  let ok = 0;
  let refused = 0;
  for (let i = 0; i < 2500; i++) {
    const doc = randomDoc(r);
    const kind = (doc as { kind: keyof typeof RESOURCE_SCHEMAS }).kind;
    const want = RESOURCE_SCHEMAS[kind].safeParse(structuredClone(doc));
    const got = validators[kind]!.safeParse(doc);
    expect(got.success).toBe(want.success);
    if (got.success && want.success) {
      expect(JSON.stringify(got.data)).toBe(JSON.stringify(want.data)); // the same fields in the same order
      expect(got.data).toEqual(want.data);
      ok++;
    } else if (!got.success && !want.success) {
      expect(formatZodError(got.error)).toBe(formatZodError(want.error));
      refused++;
    }
  }
  // both outcomes are exercised in numbers
  expect(ok).toBeGreaterThan(300);
  expect(refused).toBeGreaterThan(300);
});

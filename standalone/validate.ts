/**
 * `gw validate`'s checks (docs/standalone.md, "Checking manifests before they are applied"): manifests
 * read by standalone's reader (manifests.ts), then the checks the controller and standalone make once
 * they hold the resources, each by the function they call — nothing here decides a rule of its own:
 * - the kinds' zod schemas (validateDocument: fields, types, limit_by, enums, path patterns a linear-time
 *   matcher refuses, bounds), each issue its own problem, the first the one the controller's Ready names;
 * - the compile per namespace (compileApis: compileConfig without its hash), as the controller compiles it (compile errors such as an OAS middleware
 *   entry naming no operation; a listen path or api_id another ApiDefinition already has), then over every
 *   namespace at once, as `gw standalone` serves them on one listener (a listen path two namespaces share:
 *   a warning, as a cluster serves each namespace apart);
 * - references within a namespace: a key's policies and access_rights APIs (missingKeyReferences), a
 *   key's inactive policies (inactivePolicyReference), a Policy's access_rights APIs (missingPolicyApis),
 *   an OAuthClient's API, policy and Secret (missingClientReferences), an OAuthClient of an API of the
 *   input that takes no bearer tokens (a warning: usesOAuth), an AccessKey's Secret when it is in the input
 *   (keyMaterial: a Secret without the named key; a Secret not there at all is generated);
 * - two AccessKeys with one key (keysByHash: the first keeps it, the other is refused).
 * A reference to something the input does not have may be in the cluster: a warning, an error with
 * `strict`. A reference to an ApiDefinition or Policy the input has but its schema refused is an error
 * naming that document (it will not exist: the API server refuses it too); one the compile refuses (a
 * conflict) is not served either: an error.
 */
import type { AccessKey, AnyResource, ApiDefinition, OAuthClient, Policy } from '../crds/kinds.js';
import { compileApis, compiledOf, type CompileProblem } from '../compiler/compile-config.js';
import { usesOAuth } from '../compiler/compile-api.js';
import { missingClientReferences } from '../compiler/client-records.js';
import {
  inactivePolicyReference,
  missingKeyReferences,
  missingPolicyApis,
  type MissingReference,
} from '../compiler/key-references.js';
import { keyMaterial, keysByHash, sessionOf, snapshotSecrets } from '../compiler/key-sessions.js';
import { findSecret, toSnapshot, type ResourceSnapshot } from '../compiler/snapshot.js';
import { referenceIndex } from './references.js';
import { apiIdOf } from '../crds/schemas/api-definition.js';
import type { LoadError, LoadResult } from './manifests.js';

export type Severity = 'error' | 'warning';

/** One problem: where (file, document, resource, field), which rule, what. */
export interface Problem {
  severity: Severity;
  file: string;
  /** The document in the file (absent: the whole file). */
  document?: number;
  kind?: string;
  namespace?: string;
  name?: string;
  /** The field path (`spec.global_rate_limit.rate`), `(root)` for a document, `(file)` for a whole file. */
  field: string;
  /**
   * The rule: `file` (unreadable, not a regular file, too large), `yaml`, `schema`, `compile`, `conflict`,
   * `standalone-conflict`, `reference`, `secret`, `duplicate-key`, `duplicate-name`.
   */
  rule: string;
  /** The reason of the controller's Ready condition for it (`InvalidSpec`, `ApiNotFound`…), when it writes one. */
  reason?: string;
  message: string;
}

interface Located {
  file: string;
  index: number;
}

/** The field a compile error names: compileApi's messages start with it (`spec.…: …`). */
function splitField(message: string): { field: string; message: string } {
  const i = message.indexOf(': ');
  return i > 0 && message.startsWith('spec.')
    ? { field: message.slice(0, i), message: message.slice(i + 2) }
    : { field: 'spec', message };
}

/** The field two conflicting ApiDefinitions share: the listen path, else the api_id (compileConfig's two keys). */
function conflictField(api: ApiDefinition, other: ApiDefinition): string {
  const a = compiledOf(api);
  const b = compiledOf(other);
  const oas = api.spec.oas !== undefined;
  if ('api' in a && 'api' in b && a.api.listenPath === b.api.listenPath)
    return oas ? 'spec.oas.x-gw-api-gateway.server.listenPath.value' : 'spec.proxy.listen_path';
  if (oas && api.spec.oas?.['x-gw-api-gateway'].info?.id !== undefined) return 'spec.oas.x-gw-api-gateway.info.id';
  return api.spec.api_id !== undefined ? 'spec.api_id' : 'metadata.name';
}

/** The field a missing reference of an AccessKey is in. */
function keyReferenceField(key: AccessKey, reason: MissingReference[0]): string {
  if (reason === 'ApiNotFound') return 'spec.access_rights';
  return key.spec.apply_policies?.length ? 'spec.apply_policies' : 'spec.apply_policy_id';
}

const CLIENT_FIELDS = {
  ApiNotFound: 'spec.api_id',
  PolicyNotFound: 'spec.policy_id',
  SecretNotFound: 'spec.secretRef',
};

function byNamespace<T extends AnyResource>(list: readonly T[]): Map<string, T[]> {
  const m = new Map<string, T[]>();
  for (const r of list) {
    const l = m.get(r.metadata.namespace);
    if (l) l.push(r);
    else m.set(r.metadata.namespace, [r]);
  }
  return m;
}

/** Every problem of a read (its refusals first, in read order), then of the resources it holds. */
export function validateLoad(load: LoadResult, o: { strict?: boolean } = {}): Problem[] {
  const problems: Problem[] = [];
  for (const e of load.errors) {
    const where = {
      file: e.file,
      ...(e.index !== undefined ? { document: e.index } : {}),
      ...(e.doc?.kind !== undefined ? { kind: e.doc.kind } : {}),
      ...(e.doc?.name !== undefined ? { namespace: e.doc.namespace!, name: e.doc.name } : {}),
    };
    if (e.issues)
      for (const i of e.issues)
        problems.push({ severity: 'error', ...where, ...i, rule: 'schema', reason: 'InvalidSpec' });
    else
      problems.push({
        severity: 'error',
        ...where,
        field: e.index === undefined ? '(file)' : '(root)',
        rule: /^invalid (YAML|JSON)/.test(e.message) ? 'yaml' : 'file',
        message: e.message,
      });
  }
  // read, but perhaps not as meant (a YAML 1.1 boolean): the document is checked as read
  for (const w of load.warnings ?? [])
    for (const i of w.issues ?? [{ field: '(root)', message: w.message }])
      problems.push({
        severity: 'warning',
        file: w.file,
        ...(w.index !== undefined ? { document: w.index } : {}),
        ...(w.doc?.kind !== undefined ? { kind: w.doc.kind } : {}),
        ...(w.doc?.name !== undefined ? { namespace: w.doc.namespace!, name: w.doc.name } : {}),
        field: i.field,
        rule: 'yaml',
        message: w.message.startsWith(`${i.field}: `) ? w.message.slice(i.field.length + 2) : w.message,
      });
  const at = new Map<AnyResource, Located>(load.resources.map((r) => [r.resource, r]));
  problems.push(...validateResources(toSnapshot(load.resources.map((r) => r.resource)), at, refusedDocuments(load), o));
  // in read order: by file, then document (a stable sort keeps each document's problems in check order)
  const fileOrder = new Map(load.files.map((f, i) => [f, i]));
  const rank = (p: Problem): number => fileOrder.get(p.file) ?? fileOrder.size;
  return problems.sort((a, b) => rank(a) - rank(b) || (a.document ?? -1) - (b.document ?? -1));
}

/**
 * The ApiDefinitions (by `ApiDefinition/namespace/api_id`) and Policies (by `Policy/namespace/name`) of
 * the input its kinds' schemas refused: a reference to one is to something the input has but refused.
 */
function refusedDocuments(load: LoadResult): Map<string, LoadError> {
  const refused = new Map<string, LoadError>();
  for (const e of load.errors) {
    const d = e.doc;
    if (!e.issues || d?.name === undefined) continue;
    const id = d.kind === 'ApiDefinition' ? d.apiId : d.kind === 'Policy' ? d.name : undefined;
    const key = id !== undefined && `${d.kind}/${d.namespace}/${id}`;
    if (key && !refused.has(key)) refused.set(key, e);
  }
  return refused;
}

function validateResources(
  s: ResourceSnapshot,
  at: ReadonlyMap<AnyResource, Located>,
  refusedDocs: ReadonlyMap<string, LoadError>,
  o: { strict?: boolean },
): Problem[] {
  const problems: Problem[] = [];
  const missing: Severity = o.strict ? 'error' : 'warning';
  const add = (r: AnyResource, p: Omit<Problem, 'file' | 'kind' | 'namespace' | 'name'>): void => {
    const loc = at.get(r);
    problems.push({
      file: loc?.file ?? '-',
      ...(loc ? { document: loc.index } : {}),
      kind: r.kind,
      namespace: r.metadata.namespace,
      name: r.metadata.name,
      ...p,
    });
  };
  const label = (r: AnyResource): string => {
    const loc = at.get(r);
    return `${r.kind} ${r.metadata.namespace}/${r.metadata.name}${loc ? ` (${loc.file})` : ''}`;
  };

  // the same kind/namespace/name twice: the later apply replaces the earlier one; an ApiDefinition's twin
  // is instead the one error below (standalone keeps the first and refuses it: the same api_id)
  const seen = new Map<string, AnyResource>();
  const twinOf = new Map<AnyResource, AnyResource>();
  for (const r of [...s.apis, ...s.policies, ...s.keys, ...s.clients, ...s.secrets]) {
    const id = `${r.kind}/${r.metadata.namespace}/${r.metadata.name}`;
    const first = seen.get(id);
    if (!first) seen.set(id, r);
    else if (r.kind === 'ApiDefinition') twinOf.set(r, first);
    else
      add(r, {
        severity: 'warning',
        field: 'metadata.name',
        rule: 'duplicate-name',
        message: `${label(first)} has the same kind, namespace and name: applied after it, this one replaces it`,
      });
  }

  // compiled per namespace, as the controller does; what it refuses, then what standalone also refuses
  const compileRefusal = (p: CompileProblem, severity: Severity, rule: string, note = ''): void => {
    const api = p.resource as ApiDefinition;
    if (p.conflictsWith)
      add(api, {
        severity,
        field: conflictField(api, p.conflictsWith),
        rule,
        reason: 'InvalidSpec',
        message: `${p.message.replace(/^conflicts with ApiDefinition \S+/, `conflicts with ${label(p.conflictsWith)}`)}${
          twinOf.get(api) === p.conflictsWith
            ? ' (the same kind, namespace and name: gw standalone keeps the first and refuses this one; kubectl apply to a cluster would replace it)'
            : ''
        }${note}`,
      });
    else add(api, { severity, ...splitField(p.message), rule: 'compile', reason: 'InvalidSpec' });
  };
  const apisByNs = byNamespace(s.apis);
  const policiesByNs = byNamespace(s.policies);
  const servedIds = new Map<string, Set<string>>();
  const refused = new Set<AnyResource>();
  for (const ns of new Set([...apisByNs.keys(), ...policiesByNs.keys()])) {
    const { compiled, problems: ps } = compileApis(apisByNs.get(ns) ?? []);
    servedIds.set(ns, new Set(compiled.map((a) => a.api_id)));
    for (const p of ps) {
      refused.add(p.resource);
      compileRefusal(p, 'error', 'conflict');
    }
  }
  if (apisByNs.size > 1)
    for (const p of compileApis(s.apis).problems)
      if (!refused.has(p.resource))
        compileRefusal(
          p,
          'warning',
          'standalone-conflict',
          ' in gw standalone, which serves every namespace on one listener (a cluster serves each namespace apart)',
        );

  // references
  const index = referenceIndex(s);
  // an API or policy whose document the schema refused is in the input: not missing, refused (an error)
  const refusedDoc = (kind: 'ApiDefinition' | 'Policy', ns: string, id: string): LoadError | undefined =>
    (kind === 'ApiDefinition' ? index.apis : index.policies).has(`${ns}/${id}`)
      ? undefined
      : refusedDocs.get(`${kind}/${ns}/${id}`);
  const hasApi = (ns: string) => (id: string) =>
    index.apis.has(`${ns}/${id}`) || refusedDoc('ApiDefinition', ns, id) !== undefined;
  const hasPolicy = (ns: string) => (name: string) =>
    index.policies.has(`${ns}/${name}`) || refusedDoc('Policy', ns, name) !== undefined;
  /** One error per reference to a refused document, naming that document and where it is. */
  const refusedReferences = (
    r: AnyResource,
    kind: 'ApiDefinition' | 'Policy',
    ids: readonly string[],
    field: string,
  ): void => {
    const ns = r.metadata.namespace;
    for (const id of new Set(ids)) {
      const e = refusedDoc(kind, ns, id);
      if (!e) continue;
      const what = kind === 'ApiDefinition' ? 'API' : 'policy';
      const where = `${e.file}${e.index !== undefined ? `[${e.index}]` : ''}`;
      add(r, {
        severity: 'error',
        field,
        rule: 'reference',
        reason: kind === 'ApiDefinition' ? 'ApiNotFound' : 'PolicyNotFound',
        message: `${what} ${id} of namespace ${ns} is refused: ${kind} ${ns}/${e.doc!.name!} (${where}) does not pass its schema (its own error says why)`,
      });
    }
  };
  const policyOf = new Map(s.policies.map((p) => [`${p.metadata.namespace}/${p.metadata.name}`, p] as const));
  for (const p of s.policies as Policy[]) {
    const ns = p.metadata.namespace;
    refusedReferences(p, 'ApiDefinition', Object.keys(p.spec.access_rights ?? {}), 'spec.access_rights');
    const m = missingPolicyApis(
      p.spec.access_rights,
      ns,
      (id) => (servedIds.get(ns)?.has(id) ?? false) || refusedDoc('ApiDefinition', ns, id) !== undefined,
    );
    if (m)
      add(p, {
        // an API of the input that is refused is not served either: the input's own error
        severity: Object.keys(p.spec.access_rights ?? {}).some((id) => !hasApi(ns)(id)) ? missing : 'error',
        field: 'spec.access_rights',
        rule: 'reference',
        reason: m[0],
        message: m[1],
      });
  }
  const secrets = snapshotSecrets(s);
  for (const key of s.keys) {
    const ns = key.metadata.namespace;
    const session = sessionOf(key).session;
    refusedReferences(key, 'Policy', session.apply_policies ?? [], keyReferenceField(key, 'PolicyNotFound'));
    refusedReferences(key, 'ApiDefinition', Object.keys(session.access_rights ?? {}), 'spec.access_rights');
    for (const [reason, message] of missingKeyReferences(session, ns, hasPolicy(ns), hasApi(ns)))
      add(key, { severity: missing, field: keyReferenceField(key, reason), rule: 'reference', reason, message });
    const inactive = (session.apply_policies ?? []).filter((n) => policyOf.get(`${ns}/${n}`)?.spec.active === false);
    const i = inactivePolicyReference(ns, inactive);
    if (i)
      add(key, {
        severity: 'warning',
        field: keyReferenceField(key, i[0]),
        rule: 'reference',
        reason: i[0],
        message: i[1],
      });
    // a Secret that does not exist is generated (controller and standalone); one without the key is refused
    const ref = key.spec.secretRef;
    if (ref && findSecret(s, ns, ref.name)) {
      const m = keyMaterial(key, secrets);
      if (!m.ok)
        add(key, {
          severity: 'error',
          field: 'spec.secretRef.key',
          rule: 'secret',
          reason: m.reason,
          message: m.message,
        });
    }
  }
  // the APIs of the input by namespace/api_id, for the clients' check below (built once, not per client)
  const apisById = new Map((s.apis as ApiDefinition[]).map((a) => [`${a.metadata.namespace}/${apiIdOf(a)}`, a]));
  for (const c of s.clients as OAuthClient[]) {
    const ns = c.metadata.namespace;
    const secret = findSecret(s, ns, c.spec.secretRef.name);
    refusedReferences(c, 'ApiDefinition', [c.spec.api_id], CLIENT_FIELDS.ApiNotFound);
    if (c.spec.policy_id) refusedReferences(c, 'Policy', [c.spec.policy_id], CLIENT_FIELDS.PolicyNotFound);
    // a client of an API of the input that takes no bearer tokens: it can never get one (its token
    // endpoint answers 403), which the cluster would accept silently
    const api = apisById.get(`${ns}/${c.spec.api_id}`);
    if (api !== undefined && !usesOAuth(api))
      add(c, {
        severity: 'warning',
        field: 'spec.api_id',
        rule: 'oauth',
        reason: 'ApiNotOAuth',
        message: `API ${c.spec.api_id} does not use OAuth 2.0 (use_oauth2, or the OAS oauth2 authentication): this client can get no token`,
      });
    for (const [reason, message] of missingClientReferences(c, hasApi(ns), hasPolicy(ns), secret))
      add(c, {
        // a Secret of the input without the named key: the input's own error
        severity: reason === 'SecretNotFound' && secret ? 'error' : missing,
        field: reason === 'SecretNotFound' && secret ? 'spec.secretRef.key' : CLIENT_FIELDS[reason],
        rule: reason === 'SecretNotFound' ? 'secret' : 'reference',
        reason,
        message,
      });
  }

  // one key, two AccessKeys (any namespace: a session is found by its key alone)
  const owners = keysByHash(s);
  for (const key of s.keys) {
    const m = keyMaterial(key, secrets);
    if (!m.ok) continue;
    const owner = owners.get(m.keyHash);
    if (owner && owner !== key)
      add(key, {
        severity: 'error',
        field: key.spec.key_hash ? 'spec.key_hash' : 'spec.secretRef',
        rule: 'duplicate-key',
        reason: 'InvalidSpec',
        message: `the same key is already used by ${label(owner)}`,
      });
  }
  return problems;
}

/** `ApiDefinition default/petstore`, `(document 2)`, or what is known of it. */
function documentLabel(p: Problem): string {
  const doc = p.document !== undefined ? `[${p.document}]` : '';
  const id = p.kind ? ` ${p.kind}${p.name !== undefined ? ` ${p.namespace}/${p.name}` : ''}` : '';
  return `${p.file}${doc}${id}`;
}

/** One line: `error file[doc] Kind ns/name field: message (rule[, Reason])`. */
export function formatProblem(p: Problem): string {
  return printable(
    `${p.severity} ${documentLabel(p)} ${p.field}: ${p.message} (${p.rule}${p.reason ? `, ${p.reason}` : ''})`,
  );
}

/**
 * A problem line holds names and values from the manifests: control, bidi and other format characters
 * (CR, LF, ESC, U+202E…) are shown as \u{…} escapes, so a manifest cannot forge lines or colours in a CI log.
 * So is U+FFFD, what a file name that is not UTF-8 is decoded with: `\u{fffd}` says bytes were there. Every
 * path printed (a problem's file, a command-line path in a usage error) goes through it.
 */
const UNPRINTABLE = /[\p{Cc}\p{Cf}\u2028\u2029\uFFFD]/gu;
export const printable = (line: string): string =>
  line.replace(UNPRINTABLE, (c) => `\\u{${c.codePointAt(0)!.toString(16)}}`);

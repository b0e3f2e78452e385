/**
 * The registry of resource kinds: the single source for types, validation and the generated CRDs.
 * A resource is { apiVersion, kind, metadata, spec, status? }; spec is validated by the kind's zod schema.
 */
import { z } from 'zod';
import { AccessKeySpec } from './schemas/access-key.js';
import { ApiDefinitionSpec } from './schemas/api-definition.js';
import { Status } from './schemas/common.js';
import { OAuthClientSpec } from './schemas/oauth-client.js';
import { PolicySpec } from './schemas/policy.js';
import { jsonShapeProblem, MAX_JSON_DEPTH } from '../lib/json-shape.js';

export const GROUP = 'gw.io';
export const VERSION = 'v1alpha1';
export const API_VERSION = `${GROUP}/${VERSION}`;

export interface PrinterColumn {
  name: string;
  type: 'string' | 'integer' | 'number' | 'boolean' | 'date';
  jsonPath: string;
  description?: string;
  /** 0: always shown; 1: only with `kubectl get -o wide`. */
  priority?: number;
}

export interface KindInfo<S extends z.ZodType = z.ZodType> {
  kind: string;
  plural: string;
  singular: string;
  shortNames: string[];
  spec: S;
  description: string;
  printerColumns: PrinterColumn[];
}

const ready: PrinterColumn = {
  name: 'Ready',
  type: 'string',
  jsonPath: '.status.conditions[?(@.type=="Ready")].status',
};
const age: PrinterColumn = { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' };

export const KINDS = {
  ApiDefinition: {
    kind: 'ApiDefinition',
    plural: 'apidefinitions',
    singular: 'apidefinition',
    shortNames: ['apidef', 'gwapi'],
    spec: ApiDefinitionSpec,
    description: 'An API served by the gw gateway, with its API-level rate limits.',
    // The classic and the OAS form keep these facts in different places and a printer column has no
    // fallback, so the columns read what the controller compiled (status.listenPath, status.rate,
    // status.per in seconds; rate/per absent when the API-level limit is off), the same for both forms.
    printerColumns: [
      { name: 'Listen', type: 'string', jsonPath: '.status.listenPath' },
      { name: 'Rate', type: 'number', jsonPath: '.status.rate' },
      { name: 'Per', type: 'number', jsonPath: '.status.per' },
      ready,
      age,
    ],
  },
  Policy: {
    kind: 'Policy',
    plural: 'policies',
    singular: 'policy',
    shortNames: ['gwpol'],
    spec: PolicySpec,
    description: 'A security policy: key-level limits, quota and access rights applied to keys.',
    printerColumns: [
      { name: 'Rate', type: 'number', jsonPath: '.spec.rate' },
      { name: 'Per', type: 'number', jsonPath: '.spec.per' },
      { name: 'Quota', type: 'integer', jsonPath: '.spec.quota_max' },
      ready,
      age,
    ],
  },
  AccessKey: {
    kind: 'AccessKey',
    plural: 'accesskeys',
    singular: 'accesskey',
    shortNames: ['gwkey'],
    spec: AccessKeySpec,
    description: 'An access key and its session (limits, quota, access rights, policies).',
    printerColumns: [
      { name: 'Alias', type: 'string', jsonPath: '.spec.alias' },
      { name: 'Rate', type: 'number', jsonPath: '.spec.rate' },
      { name: 'Per', type: 'number', jsonPath: '.spec.per' },
      { name: 'Inactive', type: 'boolean', jsonPath: '.spec.is_inactive' },
      ready,
      age,
    ],
  },
  OAuthClient: {
    kind: 'OAuthClient',
    plural: 'oauthclients',
    singular: 'oauthclient',
    shortNames: ['gwclient'],
    spec: OAuthClientSpec,
    description: 'An OAuth client registered for an API.',
    printerColumns: [
      { name: 'API', type: 'string', jsonPath: '.spec.api_id' },
      { name: 'Client', type: 'string', jsonPath: '.spec.client_id' },
      { name: 'Policy', type: 'string', jsonPath: '.spec.policy_id' },
      ready,
      age,
    ],
  },
} as const satisfies Record<string, KindInfo>;

export type KindName = keyof typeof KINDS;
export const KIND_NAMES = Object.keys(KINDS) as KindName[];

export const ObjectMeta = z.looseObject({
  name: z
    .string()
    .regex(/^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/, 'must be a DNS-1123 name: lower-case letters, digits, - and .'),
  // a DNS-1123 label, as the API server requires of a namespace (kubectl would refuse another); the value
  // is not echoed in the message: a mistyped namespace may hold what was meant for the Secret's data
  namespace: z
    .string()
    .regex(
      /^(?:[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?)?$/,
      'must be a DNS-1123 label: at most 63 lower-case letters, digits and -, starting and ending with a letter or digit',
    )
    .default('default'),
  generation: z.number().int().optional(),
  resourceVersion: z.string().optional(),
  uid: z.string().optional(),
  labels: z.record(z.string(), z.string()).optional(),
  annotations: z.record(z.string(), z.string()).optional(),
});
export type ObjectMetaT = z.infer<typeof ObjectMeta>;

function envelope<K extends KindName>(kind: K) {
  return z.object({
    apiVersion: z.literal(API_VERSION),
    kind: z.literal(kind),
    metadata: ObjectMeta,
    spec: KINDS[kind].spec as (typeof KINDS)[K]['spec'],
    status: Status.optional(),
  });
}

/**
 * A resource as read from a manifest, the API server or the facade: first what zod would not see
 * (lib/json-shape.ts: a `__proto__` field, which zod's records drop silently; absurd nesting), then the
 * envelope.
 */
export function guarded<S extends z.ZodType>(schema: S) {
  return z
    .unknown()
    .superRefine((value, ctx) => {
      // two levels more than a facade body may have: the envelope (`spec`) wraps the body, and a body
      // the facade accepted must load as a manifest or a custom resource
      const p = jsonShapeProblem(value, MAX_JSON_DEPTH + 2);
      if (p) ctx.addIssue({ code: 'custom', message: p.message, path: p.path });
    })
    .pipe(schema);
}

/** The AccessKey envelope without the guard, for schemas that extend it (the guard wraps the result). */
export const AccessKeyObject = envelope('AccessKey');

export const ApiDefinitionResource = guarded(envelope('ApiDefinition'));
export const PolicyResource = guarded(envelope('Policy'));
export const AccessKeyResource = guarded(AccessKeyObject);
export const OAuthClientResource = guarded(envelope('OAuthClient'));

/** Core Secret, as far as gw reads it: data (base64) and/or stringData. */
export const SecretResource = z.object({
  apiVersion: z.literal('v1'),
  kind: z.literal('Secret'),
  metadata: ObjectMeta,
  type: z.string().optional(),
  data: z.record(z.string(), z.string().regex(/^[A-Za-z0-9+/]*={0,2}$/, 'must be base64')).optional(),
  stringData: z.record(z.string(), z.string()).optional(),
});

export type ApiDefinition = z.infer<typeof ApiDefinitionResource>;
export type Policy = z.infer<typeof PolicyResource>;
export type AccessKey = z.infer<typeof AccessKeyResource>;
export type OAuthClient = z.infer<typeof OAuthClientResource>;
export type Secret = z.infer<typeof SecretResource>;
export type AnyResource = ApiDefinition | Policy | AccessKey | OAuthClient | Secret;

export const RESOURCE_SCHEMAS = {
  ApiDefinition: ApiDefinitionResource,
  Policy: PolicyResource,
  AccessKey: AccessKeyResource,
  OAuthClient: OAuthClientResource,
  Secret: SecretResource,
} as const;

/** Value of a Secret's key, decoded (stringData wins, as in Kubernetes). */
export function secretValue(secret: Secret, key: string): string | undefined {
  const s = secret.stringData?.[key];
  if (s !== undefined) return s;
  const d = secret.data?.[key];
  return d === undefined ? undefined : Buffer.from(d, 'base64').toString('utf8');
}

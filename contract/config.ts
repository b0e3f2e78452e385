/**
 * The compiled gateway config: what the controller writes into ConfigMaps and what standalone
 * computes from its manifests directory. Sidecars read only this (plus sessions from the store).
 */
import type { PolicySpecT } from '../crds/schemas/policy.js';
import type { SmoothingT } from '../crds/schemas/common.js';
import type { OAuthGrant } from '../crds/schemas/api-definition.js';

export interface LimitSpec {
  rate: number;
  per: number; // seconds
  smoothing?: SmoothingT | null;
}

/**
 * Whose allowance an API-level limit is (docs/contract.md#limit-by; `limit_by` of the resources): one per client
 * address, or one per value of a request header (`name` lower case). Absent: one for every caller.
 */
export type ClientKey = { kind: 'ip' } | { kind: 'header'; name: string };

/** The API's global limit, with whose allowance it is. */
export interface ApiLimitSpec extends LimitSpec {
  by?: ClientKey;
}

/** One per-endpoint API-level rule, in evaluation order. `pattern` is an anchored regex source. */
export interface EndpointRule {
  method: string; // upper case, or '*'
  pattern: string;
  rate: number;
  per: number;
  /** Stable id used in limiter keys (e.g. "GET /users/{id}"). */
  id: string;
  by?: ClientKey;
}

export interface UpstreamTransport {
  ssl_ca_cert_file?: string;
  ssl_cert_file?: string;
  ssl_key_file?: string;
  ssl_server_name?: string;
  ssl_insecure_skip_verify?: boolean;
}

export interface CompiledApi {
  namespace: string;
  name: string; // metadata.name
  api_id: string;
  active: boolean;
  keyless: boolean;
  authHeader: string; // lower case
  /** strip_auth_data: authHeader is removed before the upstream (docs/proxy.md); absent: forwarded. */
  stripAuth?: true;
  listenPath: string; // starts with '/'
  strip: boolean;
  targetUrl?: string;
  /** TLS towards an https:// upstream (proxy.transport; docs/proxy.md, "Upstream TLS"). */
  transport?: UpstreamTransport;
  /** API-level global limit; absent when disabled or rate and per are both 0. */
  apiLimit?: ApiLimitSpec;
  /** Per-endpoint API-level rules (enabled ones only), in evaluation order. */
  endpointRules: EndpointRule[];
  /** OAuth 2.0 (docs/contract.md#oauth-tokens): bearer access tokens issued by the gateway instead of keys; absent: keys. */
  oauth?: CompiledOAuth;
  /** Raw streaming section of the ApiDefinition, if any (streams issue). */
  streaming?: unknown;
}

export interface CompiledOAuth {
  /** Grants oauth/token accepts; refresh_token also means refresh tokens are issued. */
  grants: OAuthGrant[];
  /** The API owner's login page (oauth/authorize answers 307 to it); absent: no authorization_code flow. */
  loginRedirect?: string;
  /** Lifetimes in seconds. */
  accessTtl: number;
  refreshTtl: number;
  /** Live tokens of each kind (access, refresh) one client may hold; a new one past it revokes the oldest. */
  maxTokensPerClient: number;
}

export interface CompiledPolicy {
  namespace: string;
  name: string;
  spec: PolicySpecT;
}

export interface CompiledConfig {
  /** Content hash of everything below. */
  hash: string;
  apis: CompiledApi[];
  /** Policies by `${namespace}/${name}`. */
  policies: Record<string, CompiledPolicy>;
}

/** A quota as the limiters apply it. */
export interface QuotaSpec {
  max: number;
  /** Seconds; ≤ 0 never renews. */
  renewal: number;
}

/** ApiDefinition: one upstream API, its listen path and its API-level limits (classic or OAS form). */
import { z } from 'zod';
import { MAX_ENDPOINT_RULES, pathPattern } from './path-pattern.js';
import { DURATION_PATTERN, durationMs } from '../../lib/duration.js';
import {
  ApiRateLimit,
  DurationString,
  HEADER_NAME_PATTERN,
  HttpMethod,
  LimitBy,
  PER_RULE,
  PerSeconds,
  Rate,
  refinePer,
} from './common.js';
import { StreamingSpec } from './streaming.js';

/**
 * An upstream URL in a scheme the proxy speaks (docs/proxy.md): ftp:, file: and the like were Ready and
 * then failed every request (classic target_url and the OAS upstream.url alike).
 */
const UpstreamUrl = z
  .string()
  .url()
  .regex(/^(https?|h2c):\/\//i, 'must be an http://, https:// or h2c:// URL (the schemes gw proxies)');

export const ClassicEndpointRule = z
  .strictObject({
    path: pathPattern('Endpoint path: a literal path or a regex pattern (e.g. .* matches everything).'),
    method: HttpMethod,
    enabled: z.boolean().default(true).describe('Turns the rule on or off.'),
    rate: Rate,
    per: PerSeconds,
    limit_by: LimitBy.optional(),
  })
  .meta({ 'x-kubernetes-validations': [PER_RULE] })
  .superRefine(refinePer)
  .describe('Per-endpoint API-level limit; rules are evaluated in array order.');

/** The OAS form of PER_RULE: an enabled limit with a rate needs a window longer than 0s. */
const OAS_PER_RULE = {
  rule: "(has(self.enabled) && !self.enabled) || self.rate <= 0 || duration(self.per) > duration('0s')",
  message: 'per must be longer than 0s when rate is greater than 0',
};

const OasRateLimit = z
  .strictObject({
    enabled: z.boolean().default(true).describe('Turns the limit on for this scope.'),
    rate: Rate,
    per: DurationString.describe('Window length as a duration, for example 10s.'),
    limit_by: LimitBy.optional(),
  })
  .meta({ 'x-kubernetes-validations': [OAS_PER_RULE] })
  .superRefine((v, ctx) => {
    if (v.enabled && v.rate > 0 && DURATION_PATTERN.test(v.per) && durationMs(v.per) === 0)
      ctx.addIssue({ code: 'custom', path: ['per'], message: OAS_PER_RULE.message });
  })
  .describe('A rate limit of the OAS form: rate requests per duration.');

/** The grants an OAuth API allows (docs/contract.md#oauth-endpoints). */
export const OAUTH_GRANTS = ['client_credentials', 'authorization_code', 'refresh_token'] as const;
export type OAuthGrant = (typeof OAUTH_GRANTS)[number];
const AccessType = z.enum(OAUTH_GRANTS);
/** An absolute http(s) URL: where the authorize endpoint hands the user to the API owner's login page. */
const LoginRedirect = z
  .string()
  .regex(/^https?:\/\/[^\s/?#]+[^\s#]*$/, 'must be an absolute http(s) URL without a fragment')
  .describe("URL of the API owner's login page: GET {listen_path}oauth/authorize answers 307 to it, query kept.");
/** Live tokens of each kind one client may hold (docs/oauth.md, "Tokens per client"); past it the oldest is revoked. */
export const MAX_TOKENS_PER_CLIENT = 1000;
const TokensPerClient = z
  .number()
  .int()
  .min(1)
  .max(1_000_000)
  .describe(
    `Live access tokens, and live refresh tokens, one client may hold (default ${MAX_TOKENS_PER_CLIENT}); a new one past it revokes the oldest.`,
  );
const TokenSeconds = (d: number, what: string) =>
  z.number().int().min(1).default(d).describe(`Lifetime of ${what} in seconds (default ${d}).`);

/** OAuth settings of a classic API (`oauth_meta`), in the spec's snake_case. */
export const OAuthMeta = z
  .strictObject({
    allowed_access_types: z
      .array(AccessType)
      .optional()
      .describe('Grants the token endpoint accepts (default: all three). refresh_token: refresh tokens are issued.'),
    auth_login_redirect: LoginRedirect.optional(),
    access_token_expires: TokenSeconds(3600, 'an access token'),
    refresh_token_expires: TokenSeconds(1209600, 'a refresh token'),
    max_tokens_per_client: TokensPerClient.optional(),
  })
  .describe('OAuth 2.0 settings (with use_oauth2, or beside an OAS oauth2.enabled).');

/** The OAS form: x-gw-api-gateway.server.authentication.oauth2 (camelCase like the rest of the extension). */
const OasOAuth2 = z
  .looseObject({
    enabled: z.boolean().default(false).describe('Bearer access tokens issued by the gateway instead of keys.'),
    allowedAccessTypes: z.array(AccessType).optional().describe('Grants the token endpoint accepts (default: all).'),
    authLoginRedirect: LoginRedirect.optional(),
    accessTokenExpires: z.number().int().min(1).optional().describe('Access token lifetime in seconds (3600).'),
    refreshTokenExpires: z.number().int().min(1).optional().describe('Refresh token lifetime in seconds (1209600).'),
    maxTokensPerClient: TokensPerClient.optional(),
    // the classic oauth_meta names are accepted here too (the camelCase one wins when both are given)
    allowed_access_types: z.array(AccessType).optional().describe('Alias of allowedAccessTypes.'),
    auth_login_redirect: LoginRedirect.optional().describe('Alias of authLoginRedirect.'),
    access_token_expires: z.number().int().min(1).optional().describe('Alias of accessTokenExpires.'),
    refresh_token_expires: z.number().int().min(1).optional().describe('Alias of refreshTokenExpires.'),
    max_tokens_per_client: TokensPerClient.optional().describe('Alias of maxTokensPerClient.'),
  })
  .describe('OAuth 2.0 at the gateway (docs/contract.md#oauth); spec.oauth_meta fills what is not given here.');

/** An API id, in either form: it names the API's buckets and its access rights, so no separators (`:`, `/`…). */
const ApiId = z.string().regex(/^[A-Za-z0-9._-]+$/, 'letters, digits, . _ -');

/** The x-gw-api-gateway extension of an OAS API definition. */
export const GwOasExtension = z
  .looseObject({
    info: z
      .looseObject({
        id: ApiId.optional().describe('API id (default: spec.api_id, then metadata.name).'),
        name: z.string().optional().describe('Human-readable name.'),
        state: z
          .looseObject({ active: z.boolean().default(true).describe('An inactive API answers 404.') })
          .optional()
          .describe('Lifecycle state of the API.'),
      })
      .optional()
      .describe('Identity and state of the API.'),
    server: z
      .looseObject({
        listenPath: z
          .strictObject({
            value: z.string().regex(/^\//, 'must start with /').describe('Path prefix the API is served under.'),
            strip: z.boolean().default(true).describe('Remove the listen path before proxying.'),
          })
          .describe('Where the API listens.'),
        authentication: z
          .looseObject({
            enabled: z.boolean().default(true).describe('false makes the API keyless.'),
            stripAuthorizationData: z
              .boolean()
              .optional()
              .describe("Remove the key's auth header before the upstream (default: spec.strip_auth_data, false)."),
            oauth2: OasOAuth2.optional(),
          })
          .optional()
          .describe('Client authentication (auth token) of the API.'),
      })
      .describe('Where the API listens and how it authenticates.'),
    upstream: z
      .looseObject({
        url: UpstreamUrl.optional().describe('Upstream URL; a sidecar --upstream overrides it.'),
        rateLimit: OasRateLimit.optional().describe('API-level limit aggregating every source.'),
      })
      .optional()
      .describe('The upstream and the API-level limit.'),
    middleware: z
      .looseObject({
        operations: z
          .record(
            z.string(),
            z
              .looseObject({ rateLimit: OasRateLimit.optional().describe('Per-endpoint limit of this operation.') })
              .describe('Middleware of one operation.'),
          )
          .optional()
          .describe('Per-operation middleware keyed by operationId.'),
      })
      .optional()
      .describe('Middleware: per-endpoint limits, evaluated in the order of the paths section.'),
  })
  .meta({ 'x-kubernetes-preserve-unknown-fields': true })
  .describe('gw extension of the OpenAPI document.');

export const OasDocument = z
  .looseObject({
    openapi: z
      .string()
      .regex(/^3\.0\.\d+$/, 'must be an OpenAPI 3.0.x version such as 3.0.3')
      .describe('OpenAPI version (3.0.x).'),
    info: z
      .looseObject({
        title: z.string().optional().describe('Title of the API.'),
        version: z.string().optional().describe('Version of the API document.'),
      })
      .optional()
      .describe('OpenAPI info object.'),
    paths: z
      .record(z.string(), z.record(z.string(), z.unknown()))
      .default({})
      .meta({ 'x-kubernetes-preserve-unknown-fields': true })
      .describe('OpenAPI paths; operationIds name the per-endpoint middleware. {name} wildcards match everything.'),
    'x-gw-api-gateway': GwOasExtension,
    'x-gw-streaming': StreamingSpec.optional().describe(
      'Streaming pipelines of this API in the OAS form: the same shape as spec.streaming (docs/streams.md).',
    ),
  })
  .meta({ 'x-kubernetes-preserve-unknown-fields': true })
  .describe('OpenAPI 3.0.x document with the x-gw-api-gateway extension.');

const BOTH_STREAMING = 'streaming is given twice: use spec.streaming or spec.oas.x-gw-streaming, not both';
/** Classic fields the OAS form has its own place for: given beside spec.oas they were ignored, silently. */
const CLASSIC_WITH_OAS =
  'is a classic field that spec.oas replaces (x-gw-api-gateway holds the listen path and the limits): remove it or spec.oas';
const STRIP_WITH_OAS =
  'proxy.strip_listen_path: false is a classic field that spec.oas replaces: set x-gw-api-gateway.server.listenPath.strip';
const KEYLESS_WITH_OAUTH = 'use_keyless: true contradicts OAuth 2.0 (use_oauth2 / oauth2.enabled): remove one';
const OAUTH_WITHOUT_AUTH =
  'x-gw-api-gateway.server.authentication.oauth2.enabled: true needs authentication (enabled: false makes the API keyless)';
const KEYLESS_WITH_OAS_AUTH =
  'use_keyless: true contradicts x-gw-api-gateway.server.authentication.enabled: true: remove one';

export const ApiDefinitionSpec = z
  .strictObject({
    name: z.string().optional().describe('Human-readable name.'),
    api_id: ApiId.optional().describe('API id; default metadata.name.'),
    active: z.boolean().default(true).describe('An inactive API answers 404.'),
    use_keyless: z.boolean().default(false).describe('When true no key is needed and key-level limits do not apply.'),
    use_oauth2: z
      .boolean()
      .default(false)
      .describe('Bearer access tokens issued by the gateway (oauth/token under the listen path) instead of keys.'),
    oauth_meta: OAuthMeta.optional(),
    auth: z
      .strictObject({
        auth_header_name: z
          .string()
          .regex(HEADER_NAME_PATTERN, 'must be an HTTP header name (a token: no spaces or separators)')
          .default('Authorization')
          .describe('Header that carries the key (raw or Bearer).'),
      })
      .optional()
      .describe('Where the access key is read from.'),
    strip_auth_data: z
      .boolean()
      .optional()
      .describe(
        "true: the key's (or the OAuth bearer token's) auth header is removed before the upstream (default false; docs/proxy.md).",
      ),
    proxy: z
      .strictObject({
        listen_path: z
          .string()
          .regex(/^\//, 'must start with /')
          .optional()
          .describe('Path prefix the API is served under (classic form: required; with spec.oas: not given).'),
        target_url: UpstreamUrl.optional().describe(
          'Upstream URL (with spec.oas: when x-gw-api-gateway.upstream.url is not given); a sidecar --upstream overrides it.',
        ),
        strip_listen_path: z.boolean().default(true).describe('Remove the listen path before proxying.'),
        transport: z
          .strictObject({
            ssl_ca_cert_file: z
              .string()
              .min(1)
              .optional()
              .describe('CA bundle (PEM) the upstream certificate must chain to.'),
            ssl_cert_file: z.string().min(1).optional().describe('Client certificate (PEM) shown to the upstream.'),
            ssl_key_file: z.string().min(1).optional().describe('Key (PEM) of ssl_cert_file.'),
            ssl_server_name: z
              .string()
              .min(1)
              .optional()
              .describe('SNI name sent, and the name the certificate must carry.'),
            ssl_insecure_skip_verify: z
              .boolean()
              .default(false)
              .describe('Do not verify the upstream certificate (logged once).'),
          })
          // a client certificate is its two files: one alone failed every request at run time (502)
          .refine((t) => (t.ssl_cert_file === undefined) === (t.ssl_key_file === undefined), {
            message: 'ssl_cert_file and ssl_key_file go together (the client certificate and its key)',
            path: ['ssl_key_file'],
          })
          .optional()
          .describe("TLS towards an https:// target_url: files on the gateway's filesystem."),
      })
      .optional()
      .describe('Routing: listen path and upstream (classic form; required unless spec.oas is given).'),
    global_rate_limit: ApiRateLimit.optional().describe(
      'API-level limit aggregating every source (or, with limit_by, every request of one client).',
    ),
    disable_rate_limit: z.boolean().default(false).describe('Turns the API-level limiter off (key limits stay on).'),
    use_extended_paths: z.boolean().default(false).describe('Turns on the per-endpoint limits of extended_paths.'),
    extended_paths: z
      .strictObject({
        rate_limit: z
          .array(ClassicEndpointRule)
          .max(MAX_ENDPOINT_RULES)
          .default([])
          .describe(
            'Per-endpoint API-level limits, evaluated in array order; the first matching enabled rule applies.',
          ),
      })
      .optional()
      .describe('Per-endpoint API-level limits (used when use_extended_paths is true).'),
    oas: OasDocument.optional(),
    streaming: StreamingSpec.optional().describe('Streaming pipelines served with this API (docs/streams.md).'),
  })
  .meta({
    'x-kubernetes-validations': [
      {
        rule: 'has(self.oas) || (has(self.proxy) && has(self.proxy.listen_path))',
        message: 'proxy.listen_path is required unless spec.oas is given',
      },
      {
        // CEL escapes "-" in property names as __dash__.
        rule: '!has(self.streaming) || !has(self.oas) || !has(self.oas.x__dash__gw__dash__streaming)',
        message: BOTH_STREAMING,
      },
      {
        rule: '!has(self.oas) || (!(has(self.proxy) && has(self.proxy.listen_path)) && !has(self.global_rate_limit) && !has(self.extended_paths) && !(has(self.use_extended_paths) && self.use_extended_paths))',
        message: `proxy.listen_path, global_rate_limit, use_extended_paths and extended_paths are classic fields that spec.oas replaces (x-gw-api-gateway holds the listen path and the limits): remove them or spec.oas`,
      },
      {
        rule: '!has(self.oas) || !has(self.proxy) || !has(self.proxy.strip_listen_path) || self.proxy.strip_listen_path',
        message: STRIP_WITH_OAS,
      },
      {
        rule: '!has(self.use_keyless) || !self.use_keyless || !has(self.use_oauth2) || !self.use_oauth2',
        message: KEYLESS_WITH_OAUTH,
      },
      {
        rule: '!has(self.oas) || !has(self.use_keyless) || !self.use_keyless || !has(self.oas.x__dash__gw__dash__api__dash__gateway.server.authentication) || !has(self.oas.x__dash__gw__dash__api__dash__gateway.server.authentication.oauth2) || !has(self.oas.x__dash__gw__dash__api__dash__gateway.server.authentication.oauth2.enabled) || !self.oas.x__dash__gw__dash__api__dash__gateway.server.authentication.oauth2.enabled',
        message: KEYLESS_WITH_OAUTH,
      },
      {
        rule: '!has(self.oas) || !has(self.oas.x__dash__gw__dash__api__dash__gateway.server.authentication) || !has(self.oas.x__dash__gw__dash__api__dash__gateway.server.authentication.enabled) || self.oas.x__dash__gw__dash__api__dash__gateway.server.authentication.enabled || !has(self.oas.x__dash__gw__dash__api__dash__gateway.server.authentication.oauth2) || !has(self.oas.x__dash__gw__dash__api__dash__gateway.server.authentication.oauth2.enabled) || !self.oas.x__dash__gw__dash__api__dash__gateway.server.authentication.oauth2.enabled',
        message: OAUTH_WITHOUT_AUTH,
      },
      {
        rule: '!has(self.oas) || !has(self.use_keyless) || !self.use_keyless || !has(self.oas.x__dash__gw__dash__api__dash__gateway.server.authentication) || !has(self.oas.x__dash__gw__dash__api__dash__gateway.server.authentication.enabled) || !self.oas.x__dash__gw__dash__api__dash__gateway.server.authentication.enabled',
        message: KEYLESS_WITH_OAS_AUTH,
      },
    ],
  })
  .superRefine((spec, ctx) => {
    const oasAuth = spec.oas?.['x-gw-api-gateway'].server.authentication;
    if (spec.use_keyless && (spec.use_oauth2 || oasAuth?.oauth2?.enabled === true))
      ctx.addIssue({ code: 'custom', path: ['use_keyless'], message: KEYLESS_WITH_OAUTH });
    if (oasAuth?.enabled === false && oasAuth.oauth2?.enabled === true)
      ctx.addIssue({
        code: 'custom',
        path: ['oas', 'x-gw-api-gateway', 'server', 'authentication', 'oauth2', 'enabled'],
        message: OAUTH_WITHOUT_AUTH,
      });
    if (!spec.oas && !spec.proxy?.listen_path) {
      ctx.addIssue({
        code: 'custom',
        path: ['proxy', 'listen_path'],
        message: 'proxy.listen_path is required unless spec.oas is given',
      });
    }
    if (spec.streaming && spec.oas?.['x-gw-streaming']) {
      ctx.addIssue({ code: 'custom', path: ['streaming'], message: BOTH_STREAMING });
    }
    if (spec.oas) {
      const classic: [boolean, (string | number)[]][] = [
        [spec.proxy?.listen_path !== undefined, ['proxy', 'listen_path']],
        [spec.global_rate_limit !== undefined, ['global_rate_limit']],
        [spec.use_extended_paths, ['use_extended_paths']],
        [spec.extended_paths !== undefined, ['extended_paths']],
      ];
      for (const [given, path] of classic) if (given) ctx.addIssue({ code: 'custom', path, message: CLASSIC_WITH_OAS });
      if (spec.proxy?.strip_listen_path === false)
        ctx.addIssue({ code: 'custom', path: ['proxy', 'strip_listen_path'], message: STRIP_WITH_OAS });
      // an authentication the document asks for is never lifted by the classic switch (it made the API keyless)
      if (spec.use_keyless && spec.oas['x-gw-api-gateway'].server.authentication?.enabled === true) {
        ctx.addIssue({ code: 'custom', path: ['use_keyless'], message: KEYLESS_WITH_OAS_AUTH });
      }
    }
  })
  .describe('An API served by the gateway.');

export type ApiDefinitionSpecT = z.infer<typeof ApiDefinitionSpec>;
export type OasDocumentT = z.infer<typeof OasDocument>;

/** What apiIdOf reads of an ApiDefinition; also a raw cached one, not validated (any level may be missing). */
export interface ApiIdSource {
  metadata: { name: string };
  spec?: { api_id?: string; oas?: { 'x-gw-api-gateway'?: { info?: { id?: string } } } };
}

/** The api_id of an ApiDefinition: OAS info.id, then spec.api_id, then the name (the compiler, facade and operator all use this). */
export function apiIdOf(api: { metadata: { name: string }; spec: ApiDefinitionSpecT } | ApiIdSource): string {
  return api.spec?.oas?.['x-gw-api-gateway']?.info?.id ?? api.spec?.api_id ?? api.metadata.name;
}

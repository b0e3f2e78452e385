/**
 * spec.streaming of an ApiDefinition: Benthos-style stream pipelines (input → processors → output) whose
 * calls to external services share local rate-limit resources. A component is an object with exactly one
 * key, the component type, holding its options. Descriptions end up in the CRD (kubectl explain).
 *
 * CRD notes: components are objects with every type as an optional property plus a CEL rule "exactly one"
 * (a zod union would become an anyOf of typed objects, which is not a structural schema); lists and maps
 * carry maxItems/maxProperties so the API server can bound the cost of the CEL rules.
 */
import { z } from 'zod';
import { boundedDuration } from './bounded-duration.js';

/** A label is any string up to 63 characters, '' included: a resource without a label is labelled ''. */
const Label = z.string().max(63).describe('Name of a rate-limit resource declared in rate_limit_resources.');

/**
 * Windows of rate-limit resources: from 1ms (0 cannot limit anything) to 8784h (366 days, so daily,
 * monthly and yearly quotas fit; the limiter chains Node timers past their 24.8-day limit).
 */
const WindowDuration = boundedDuration({
  min: '1ms',
  max: '8784h',
  why: 'a window of 0 limits nothing; 8784h is 366 days',
});

/**
 * Timers of components (request timeout, backoff, claim_idle): from 1ms (0 cannot work: a timeout of 0
 * fails every request, a backoff of 0 never grows) to 24h.
 */
const TimerDuration = boundedDuration({
  min: '1ms',
  max: '24h',
  why: '0 cannot work; more than a day is refused as a likely mistake',
});

export const RateLimitResource = z
  .strictObject({
    label: Label.default('').describe(
      "Name that components use to refer to the resource (unique). Default '': a resource without a label is referenced only by a component naming rate_limit: ''.",
    ),
    local: z
      .strictObject({
        count: z.number().int().min(1).default(1000).describe('Maximum accesses per interval.'),
        interval: WindowDuration.default('1s').describe(
          'Window of the limit: a duration such as 1s, 200ms or 24h, from 1ms to 8784h (366 days).',
        ),
      })
      .default({ count: 1000, interval: '1s' })
      .describe('A limit local to one pipeline instance (not shared across gateway processes).'),
  })
  .describe('A rate-limit resource: components naming its label together stay under count accesses per interval.');

/** An object whose keys are component types; exactly one must be set (zod and CEL agree). */
function component<T extends Record<string, z.ZodType>>(what: string, shape: T) {
  const names = Object.keys(shape);
  const optional = Object.fromEntries(Object.entries(shape).map(([k, s]) => [k, s.optional()])) as {
    [K in keyof T]: z.ZodOptional<T[K]>;
  };
  const message = `exactly one ${what} type must be given: one of ${names.join(', ')}`;
  return z
    .strictObject(optional)
    .meta({
      'x-kubernetes-validations': [
        { rule: `${names.map((n) => `(has(self.${n}) ? 1 : 0)`).join(' + ')} == 1`, message },
      ],
    })
    .superRefine((v, ctx) => {
      const set = names.filter((n) => (v as Record<string, unknown>)[n] !== undefined);
      if (set.length !== 1)
        ctx.addIssue({ code: 'custom', path: [], message: `${message} (got ${set.length ? set.join(', ') : 'none'})` });
    });
}

const Headers = z.record(z.string(), z.string()).default({}).describe('Request headers.');

const Backoff = z
  .strictObject({
    initial_interval: TimerDuration.default('500ms').describe('Wait before the first retry (1ms to 24h).'),
    max_interval: TimerDuration.default('10s').describe('Upper bound of the exponential backoff (1ms to 24h).'),
  })
  .default({ initial_interval: '500ms', max_interval: '10s' })
  .describe('Exponential backoff between retries; a Retry-After of the peer takes precedence.');

const httpClientFields = {
  url: z.string().url().describe('URL of the external service.'),
  verb: z.enum(['GET', 'POST', 'PUT', 'PATCH', 'DELETE']).default('POST').describe('HTTP method.'),
  headers: Headers,
  rate_limit: Label.optional().describe(
    'Label of the rate-limit resource every request (and retry) of this component takes from.',
  ),
  timeout: TimerDuration.default('5s').describe('Timeout of one request (1ms to 24h).'),
  max_retries: z
    .number()
    .int()
    .min(0)
    .default(0)
    .describe('Retries on 429, 5xx, 408 and network errors before giving up; 0 retries for ever (the pipeline waits).'),
  backoff: Backoff,
};

// ---- inputs ----------------------------------------------------------------------------------------

export const HttpServerInput = z
  .strictObject({
    path: z
      .string()
      .regex(/^\//, 'must start with /')
      .default('/')
      .describe('Path under the API listen path that accepts messages (POST, one message per request).'),
    max_pending: z
      .number()
      .int()
      .min(1)
      .default(1000)
      .describe('Accepted messages not yet delivered; beyond this the input answers 503 with Retry-After.'),
    max_pending_bytes: z
      .number()
      .int()
      .min(1)
      .default(16777216)
      .describe(
        'Bytes of accepted message bodies waiting in the buffer; beyond this the input answers 503 with Retry-After (docs/streams.md).',
      ),
    max_body_bytes: z.number().int().min(1).default(1048576).describe('Largest accepted message body (413 above).'),
  })
  .describe('Messages POSTed under the API listen path, acknowledged with 202 once accepted.');

export const RedisStreamsInput = z
  .strictObject({
    url: z
      .string()
      .regex(/^rediss?:\/\//, 'must be a redis:// or rediss:// URL')
      .optional()
      .describe('Redis URL; default the gateway store (--redis).'),
    stream: z.string().min(1).describe('Stream key.'),
    group: z.string().min(1).describe('Consumer group (created when missing).'),
    consumer: z
      .string()
      .min(1)
      .optional()
      .describe('Consumer name; default the host name (the pod name), stable across restarts.'),
    body_key: z
      .string()
      .min(1)
      .default('body')
      .describe('Field holding the message body; without it the message is the object of all fields.'),
    start_from_oldest: z
      .boolean()
      .default(true)
      .describe('A new group starts at the beginning of the stream (else only new entries).'),
    batch_size: z.number().int().min(1).default(10).describe('Entries read per XREADGROUP.'),
    claim_idle: boundedDuration({
      min: '300ms',
      max: '24h',
      why: 'entries in flight here are touched every claim_idle/3, at least 100ms apart: below 300ms other consumers claim them mid-delivery',
    })
      .default('30s')
      .describe('Entries pending this long with another (dead) consumer are claimed and redelivered (300ms to 24h).'),
  })
  .describe('A consumer group on a Redis stream; an entry is acknowledged (XACK) only after the output succeeded.');

export const GenerateInput = z
  .strictObject({
    interval: boundedDuration({ min: '0s', max: '24h', why: '0 generates as fast as the output takes them' })
      .default('1s')
      .describe('Time between messages (0s to 24h; 0s: as fast as the output takes them).'),
    count: z.number().int().min(0).default(0).describe('Messages to generate; 0 for ever.'),
    message: z.unknown().optional().describe('Body of every generated message (any JSON value; default {}).'),
  })
  .describe('Generates a message on a timer (demos and tests).');

export const InputSpec = component('input', {
  http_server: HttpServerInput,
  redis_streams: RedisStreamsInput,
  generate: GenerateInput,
}).describe('Where messages come from: exactly one of http_server, redis_streams, generate.');

// ---- processors ------------------------------------------------------------------------------------

export const MappingProcessor = z
  .strictObject({
    move: z
      .record(z.string().min(1), z.string().min(1))
      .optional()
      .describe('Field moves, from → to (dotted paths for nested fields). Applied first.'),
    set: z
      .record(z.string().min(1), z.unknown())
      .optional()
      .meta({ 'x-kubernetes-preserve-unknown-fields': true })
      .describe('Fields to set, path → JSON value. Applied after move.'),
    delete: z.array(z.string().min(1)).optional().describe('Fields to delete. Applied last.'),
  })
  .describe('Simple field moves, sets and deletes on a JSON object message (no scripting).');

export const HttpClientProcessor = z
  .strictObject({
    ...httpClientFields,
    result_field: z
      .string()
      .min(1)
      .optional()
      .describe(
        'Store the response (JSON when it parses) under this field; default: the response replaces the message.',
      ),
  })
  .describe('Calls a service with the message and uses the response (enrichment).');

export const ProcessorSpec = component('processor', {
  mapping: MappingProcessor,
  http_client: HttpClientProcessor,
}).describe('A processor: exactly one of mapping, http_client.');

// ---- outputs ---------------------------------------------------------------------------------------

export const HttpClientOutput = z
  .strictObject({
    ...httpClientFields,
    max_in_flight: z
      .number()
      .int()
      .min(1)
      .max(256)
      .default(1)
      .describe('Messages delivered concurrently; 1 keeps the input order.'),
  })
  .describe('Sends every message to an HTTP service, retrying 429/5xx with backoff and honouring Retry-After.');

export const DropOutput = z.strictObject({}).describe('Discards every message.');
export const StdoutOutput = z.strictObject({}).describe('Writes every message as one JSON line to standard output.');

export const OutputSpec = component('output', {
  http_client: HttpClientOutput,
  drop: DropOutput,
  stdout: StdoutOutput,
}).describe('Where messages go: exactly one of http_client, drop, stdout.');

// ---- streams ---------------------------------------------------------------------------------------

export const StreamSpec = z
  .strictObject({
    input: InputSpec,
    pipeline: z
      .strictObject({
        processors: z.array(ProcessorSpec).max(32).default([]).describe('Processors applied in order.'),
      })
      .optional()
      .describe('Processing between input and output.'),
    output: OutputSpec,
  })
  .describe('One stream: input → processors → output.');

export const StreamingSpec = z
  .strictObject({
    rate_limit_resources: z
      .array(RateLimitResource)
      .max(64)
      .default([])
      .meta({
        'x-kubernetes-validations': [
          {
            rule: 'self.all(r, self.exists_one(o, o.label == r.label))',
            message: 'rate-limit resource labels must be unique',
          },
        ],
      })
      .describe('Declared rate-limit resources.'),
    streams: z
      .record(
        z
          .string()
          .regex(/^[A-Za-z0-9][A-Za-z0-9._-]*$/, 'stream names: letters, digits, . _ -')
          .max(63),
        StreamSpec,
      )
      .default({})
      .meta({ maxProperties: 32 })
      .describe('Named streams.'),
  })
  .meta({
    // The unknown-label rule in the API server too (zod names the exact field; CEL cannot).
    'x-kubernetes-validations': [
      {
        rule:
          'self.streams.all(n, (!has(self.streams[n].output.http_client) || !has(self.streams[n].output.http_client.rate_limit) || ' +
          'self.rate_limit_resources.exists(r, r.label == self.streams[n].output.http_client.rate_limit)) && ' +
          '(!has(self.streams[n].pipeline) || self.streams[n].pipeline.processors.all(p, !has(p.http_client) || ' +
          '!has(p.http_client.rate_limit) || self.rate_limit_resources.exists(r, r.label == p.http_client.rate_limit))))',
        message: 'a rate_limit names a label that rate_limit_resources does not declare',
      },
    ],
  })
  .superRefine((s, ctx) => {
    const labels = new Set<string>();
    s.rate_limit_resources.forEach((r, i) => {
      if (labels.has(r.label)) {
        const unlabelled = r.label === '' ? ' (a resource without a label is labelled "")' : '';
        ctx.addIssue({
          code: 'custom',
          path: ['rate_limit_resources', i, 'label'],
          message: `duplicate rate-limit label ${JSON.stringify(r.label)}${unlabelled}`,
        });
      }
      labels.add(r.label);
    });
    const known = [...labels].map((l) => JSON.stringify(l)).join(', ') || 'none declared';
    const checkLabel = (label: string | undefined, path: (string | number)[]) => {
      if (label !== undefined && !labels.has(label)) {
        ctx.addIssue({
          code: 'custom',
          path,
          message: `unknown rate-limit label ${JSON.stringify(label)} (rate_limit_resources: ${known})`,
        });
      }
    };
    const paths = new Map<string, string>();
    for (const [name, st] of Object.entries(s.streams)) {
      (st.pipeline?.processors ?? []).forEach((p, i) => {
        checkLabel(p.http_client?.rate_limit, [
          'streams',
          name,
          'pipeline',
          'processors',
          i,
          'http_client',
          'rate_limit',
        ]);
      });
      checkLabel(st.output.http_client?.rate_limit, ['streams', name, 'output', 'http_client', 'rate_limit']);
      const hs = st.input.http_server;
      if (hs) {
        const p = normalizeInputPath(hs.path);
        const other = paths.get(p);
        if (other !== undefined) {
          ctx.addIssue({
            code: 'custom',
            path: ['streams', name, 'input', 'http_server', 'path'],
            message: `path ${JSON.stringify(hs.path)} is already used by stream ${JSON.stringify(other)}`,
          });
        }
        paths.set(p, name);
      }
    }
  })
  .describe('Streaming pipelines served with this API, and the rate-limit resources their components share.');

/** "/a/" and "/a" name the same input path; "" and "/" too. */
export function normalizeInputPath(p: string): string {
  const q = p.split('?')[0] ?? '';
  const withSlash = q.startsWith('/') ? q : `/${q}`;
  const trimmed = withSlash.replace(/\/+$/, '');
  return trimmed === '' ? '/' : trimmed;
}

export type StreamingSpecT = z.infer<typeof StreamingSpec>;
export type StreamSpecT = z.infer<typeof StreamSpec>;
export type RateLimitResourceT = z.infer<typeof RateLimitResource>;
export type InputSpecT = z.infer<typeof InputSpec>;
export type ProcessorSpecT = z.infer<typeof ProcessorSpec>;
export type OutputSpecT = z.infer<typeof OutputSpec>;
export type HttpServerInputT = z.infer<typeof HttpServerInput>;
export type RedisStreamsInputT = z.infer<typeof RedisStreamsInput>;
export type GenerateInputT = z.infer<typeof GenerateInput>;
export type MappingProcessorT = z.infer<typeof MappingProcessor>;
export type HttpClientProcessorT = z.infer<typeof HttpClientProcessor>;
export type HttpClientOutputT = z.infer<typeof HttpClientOutput>;

import { ApiDefinitionResource } from '../../../crds/kinds.js';
import { generatedFiles } from '../../../crds/generate.js';
import { StreamingSpec } from '../../../crds/schemas/streaming.js';
import { applyMapping } from '../../../streams/processors/mapping.js';
import { describeIssues } from '../../../streams/manager.js';

const out = (extra: Record<string, unknown> = {}) => ({ http_client: { url: 'http://127.0.0.1:1/x', ...extra } });
const streaming = (
  streams: Record<string, unknown>,
  resources: unknown[] = [{ label: 'api', local: { count: 10, interval: '1s' } }],
) => ({
  rate_limit_resources: resources,
  streams,
});

function issuePaths(v: unknown): string[] {
  const r = StreamingSpec.safeParse(v);
  if (r.success) return [];
  return r.error.issues.map((i) => [...i.path, ...((i as { keys?: string[] }).keys ?? [])].join('.'));
}

describe('spec.streaming schema', () => {
  test('a full config parses and gets its defaults', () => {
    const s = StreamingSpec.parse(
      streaming({
        intake: {
          input: { http_server: {} },
          pipeline: {
            processors: [
              { mapping: { set: { a: 1 } } },
              { http_client: { url: 'http://127.0.0.1:1/enrich', rate_limit: 'api' } },
            ],
          },
          output: out({ rate_limit: 'api' }),
        },
        queue: { input: { redis_streams: { stream: 's', group: 'g' } }, output: { drop: {} } },
        demo: {
          input: { generate: { interval: '100ms', count: 3, message: { hello: 'world' } } },
          output: { stdout: {} },
        },
      }),
    );
    expect(s.streams.intake!.input.http_server).toEqual({
      path: '/',
      max_pending: 1000,
      max_pending_bytes: 16777216,
      max_body_bytes: 1048576,
    });
    const o = s.streams.intake!.output.http_client!;
    expect(o.verb).toBe('POST');
    expect(o.max_in_flight).toBe(1);
    expect(o.max_retries).toBe(0);
    expect(o.backoff).toEqual({ initial_interval: '500ms', max_interval: '10s' });
    expect(s.streams.queue!.input.redis_streams!.body_key).toBe('body');
  });

  test.each([
    [
      'unknown label in the output',
      streaming({ a: { input: { http_server: {} }, output: out({ rate_limit: 'nope' }) } }),
      'streams.a.output.http_client.rate_limit',
    ],
    [
      'unknown label in a processor',
      streaming({
        a: {
          input: { http_server: {} },
          pipeline: { processors: [{ mapping: {} }, { http_client: { url: 'http://x.test/', rate_limit: 'nope' } }] },
          output: { drop: {} },
        },
      }),
      'streams.a.pipeline.processors.1.http_client.rate_limit',
    ],
    ['unknown component', streaming({ a: { input: { kafka: {} }, output: { drop: {} } } }), 'streams.a.input.kafka'],
    [
      'two component types in one',
      streaming({ a: { input: { http_server: {}, generate: {} }, output: { drop: {} } } }),
      'streams.a.input',
    ],
    ['no component type', streaming({ a: { input: {}, output: { drop: {} } } }), 'streams.a.input'],
    ['negative count', streaming({}, [{ label: 'x', local: { count: -1 } }]), 'rate_limit_resources.0.local.count'],
    [
      'bad duration',
      streaming({}, [{ label: 'x', local: { interval: 'soon' } }]),
      'rate_limit_resources.0.local.interval',
    ],
    ['duplicate label', streaming({}, [{ label: 'x' }, { label: 'x' }]), 'rate_limit_resources.1.label'],
    ['two resources without a label (both "")', streaming({}, [{}, { label: '' }]), 'rate_limit_resources.1.label'],
    [
      'rate_limit "" with no unlabelled resource',
      streaming({ a: { input: { http_server: {} }, output: out({ rate_limit: '' }) } }),
      'streams.a.output.http_client.rate_limit',
    ],
    [
      'a window of 0s',
      streaming({}, [{ label: 'x', local: { count: 2, interval: '0s' } }]),
      'rate_limit_resources.0.local.interval',
    ],
    [
      'a window of 0ms',
      streaming({}, [{ label: 'x', local: { interval: '0ms' } }]),
      'rate_limit_resources.0.local.interval',
    ],
    [
      'a window over 366 days',
      streaming({}, [{ label: 'x', local: { interval: '8785h' } }]),
      'rate_limit_resources.0.local.interval',
    ],
    [
      'an output timeout of 600h',
      streaming({ a: { input: { http_server: {} }, output: out({ timeout: '600h' }) } }),
      'streams.a.output.http_client.timeout',
    ],
    [
      'an output timeout of 0s',
      streaming({ a: { input: { http_server: {} }, output: out({ timeout: '0s' }) } }),
      'streams.a.output.http_client.timeout',
    ],
    [
      'a processor timeout of 600h',
      streaming({
        a: {
          input: { http_server: {} },
          pipeline: { processors: [{ http_client: { url: 'http://x.test/', timeout: '600h' } }] },
          output: { drop: {} },
        },
      }),
      'streams.a.pipeline.processors.0.http_client.timeout',
    ],
    [
      'a backoff starting at 0ms',
      streaming({ a: { input: { http_server: {} }, output: out({ backoff: { initial_interval: '0ms' } }) } }),
      'streams.a.output.http_client.backoff.initial_interval',
    ],
    [
      'a backoff capped at 600h',
      streaming({ a: { input: { http_server: {} }, output: out({ backoff: { max_interval: '600h' } }) } }),
      'streams.a.output.http_client.backoff.max_interval',
    ],
    [
      'claim_idle 0s',
      streaming({
        a: { input: { redis_streams: { stream: 's', group: 'g', claim_idle: '0s' } }, output: { drop: {} } },
      }),
      'streams.a.input.redis_streams.claim_idle',
    ],
    [
      'a generate interval of 600h',
      streaming({ a: { input: { generate: { interval: '600h' } }, output: { drop: {} } } }),
      'streams.a.input.generate.interval',
    ],
    [
      'max_in_flight 0',
      streaming({ a: { input: { http_server: {} }, output: out({ max_in_flight: 0 }) } }),
      'streams.a.output.http_client.max_in_flight',
    ],
    [
      'two http_server inputs on one path',
      streaming({
        a: { input: { http_server: { path: '/in' } }, output: { drop: {} } },
        b: { input: { http_server: { path: '/in/' } }, output: { drop: {} } },
      }),
      'streams.b.input.http_server.path',
    ],
  ])('refuses %s and names the field', (_name, spec, field) => {
    const paths = issuePaths(spec);
    expect(paths).toContain(field);
  });

  test('a resource without a label is labelled ""; only rate_limit "" names it', () => {
    const s = StreamingSpec.parse(
      streaming({ a: { input: { http_server: {} }, output: out({ rate_limit: '' }) } }, [
        { local: { count: 2 } },
        { label: 'x' },
      ]),
    );
    expect(s.rate_limit_resources.map((r) => r.label)).toEqual(['', 'x']);
    expect(s.streams.a!.output.http_client!.rate_limit).toBe('');
    const dup = StreamingSpec.safeParse(streaming({}, [{}, {}]));
    expect(describeIssues(dup.error!.issues)).toBe(
      'spec.streaming.rate_limit_resources.1.label: duplicate rate-limit label "" (a resource without a label is labelled "")',
    );
  });

  test('a long window (600h, 8784h) is accepted: the limiter waits it out (timers chained past 24.8 days)', () => {
    const s = StreamingSpec.parse(
      streaming({}, [
        { label: 'm', local: { count: 2, interval: '600h' } },
        { label: 'y', local: { interval: '8784h' } },
      ]),
    );
    expect(s.rate_limit_resources.map((r) => r.local.interval)).toEqual(['600h', '8784h']);
  });

  test('a zero window is refused naming the field and the range', () => {
    const r = StreamingSpec.safeParse(streaming({}, [{ label: 'x', local: { count: 2, interval: '0s' } }]));
    expect(describeIssues(r.error!.issues)).toBe(
      'spec.streaming.rate_limit_resources.0.local.interval: must be a duration from 1ms to 8784h (a window of 0 limits nothing; 8784h is 366 days)',
    );
  });

  test('the unknown-label message names the label and what is declared', () => {
    const r = StreamingSpec.safeParse(
      streaming({ a: { input: { http_server: {} }, output: out({ rate_limit: 'nope' }) } }),
    );
    expect(r.success).toBe(false);
    expect(describeIssues(r.error!.issues)).toBe(
      'spec.streaming.streams.a.output.http_client.rate_limit: unknown rate-limit label "nope" (rate_limit_resources: "api")',
    );
  });

  test('an ApiDefinition carries streaming and refuses a bad one with the full path', () => {
    const doc = (s: unknown) => ({
      apiVersion: 'gw.io/v1alpha1',
      kind: 'ApiDefinition',
      metadata: { name: 'a' },
      spec: { proxy: { listen_path: '/a/' }, streaming: s },
    });
    expect(
      ApiDefinitionResource.safeParse(
        doc(streaming({ a: { input: { http_server: {} }, output: out({ rate_limit: 'api' }) } })),
      ).success,
    ).toBe(true);
    const r = ApiDefinitionResource.safeParse(
      doc(streaming({ a: { input: { http_server: {} }, output: out({ rate_limit: 'zzz' }) } })),
    );
    expect(r.success).toBe(false);
    expect(r.error!.issues[0]!.path.join('.')).toBe('spec.streaming.streams.a.output.http_client.rate_limit');
  });

  test('the generated CRD stays structural: typed fields, CEL one-of rules, no anyOf', () => {
    const apidef = generatedFiles().get('apidefinitions.gw.io.yaml')!;
    expect(apidef).toContain('streaming:');
    expect(apidef).toContain(
      '(has(self.http_server) ? 1 : 0) + (has(self.redis_streams) ? 1 : 0) + (has(self.generate) ? 1 : 0) == 1',
    );
    expect(apidef).toContain('self.all(r, self.exists_one(o, o.label == r.label))');
    expect(apidef).toContain("duration(self) >= duration('1ms') && duration(self) <= duration('8784h')");
    expect(apidef).toContain("duration(self) >= duration('1ms') && duration(self) <= duration('24h')");
    const section = apidef.slice(apidef.indexOf('streaming:'));
    expect(section).not.toMatch(/anyOf|oneOf|allOf/);
  });
});

describe('mapping processor', () => {
  test('moves, then sets, then deletes (dotted paths), without touching the input', () => {
    const input = { a: 1, user: { id: 'u1', secret: 's' }, drop: true };
    const out = applyMapping(
      {
        move: { 'user.id': 'customer.id', a: 'b' },
        set: { 'meta.source': 'gw', n: 2 },
        delete: ['drop', 'user.secret'],
      },
      input,
    );
    expect(out).toEqual({ b: 1, user: {}, customer: { id: 'u1' }, meta: { source: 'gw' }, n: 2 });
    expect(input).toEqual({ a: 1, user: { id: 'u1', secret: 's' }, drop: true });
  });

  test('refuses a message that is not a JSON object', () => {
    expect(() => applyMapping({ set: { a: 1 } }, 'text')).toThrow('not a JSON object');
  });
});

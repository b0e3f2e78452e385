/**
 * spec.streaming: the zod schema and the real kube-apiserver (generated CRD, CEL rules) agree on what
 * they refuse and accept, the unknown-label rule included (a CEL rule over streams and processors).
 */
import { stringify } from 'yaml';
import { validateDocument } from '../../../standalone/manifests.js';
import { freshNamespace, kubectl } from '../../helpers/kube.js';

const api = (streaming: unknown, name = 'streams') => ({
  apiVersion: 'gw.io/v1alpha1',
  kind: 'ApiDefinition',
  metadata: { name },
  spec: { proxy: { listen_path: '/ev/' }, streaming },
});
const out = { http_client: { url: 'http://hooks.example.com/in', rate_limit: 'peer', max_in_flight: 2 } };
const res = [{ label: 'peer', local: { count: 10, interval: '1s' } }];

const bad: [string, unknown][] = [
  ['unknown component', { streams: { s: { input: { kafka: {} }, output: { drop: {} } } } }],
  ['two input types', { streams: { s: { input: { http_server: {}, generate: {} }, output: { drop: {} } } } }],
  ['no output type', { streams: { s: { input: { http_server: {} }, output: {} } } }],
  ['negative count', { rate_limit_resources: [{ label: 'x', local: { count: -1 } }] }],
  ['bad interval', { rate_limit_resources: [{ label: 'x', local: { interval: 'soon' } }] }],
  ['duplicate labels', { rate_limit_resources: [{ label: 'x' }, { label: 'x' }] }],
  [
    'max_in_flight 0',
    {
      streams: {
        s: { input: { http_server: {} }, output: { http_client: { url: 'http://a.example/', max_in_flight: 0 } } },
      },
    },
  ],
  [
    'redis input without a stream',
    { streams: { s: { input: { redis_streams: { group: 'g' } }, output: { drop: {} } } } },
  ],
  [
    'unknown label in the output',
    {
      rate_limit_resources: res,
      streams: {
        s: { input: { http_server: {} }, output: { http_client: { url: 'http://a.example/', rate_limit: 'nope' } } },
      },
    },
  ],
  [
    'unknown label in a processor',
    {
      rate_limit_resources: res,
      streams: {
        s: {
          input: { http_server: {} },
          pipeline: {
            processors: [{ mapping: {} }, { http_client: { url: 'http://a.example/', rate_limit: 'nope' } }],
          },
          output: { drop: {} },
        },
      },
    },
  ],
  [
    'a label and no resources at all',
    {
      streams: {
        s: { input: { http_server: {} }, output: { http_client: { url: 'http://a.example/', rate_limit: 'x' } } },
      },
    },
  ],
  ['a window of 0s', { rate_limit_resources: [{ label: 'x', local: { count: 2, interval: '0s' } }] }],
  ['a window of 0ms', { rate_limit_resources: [{ label: 'x', local: { interval: '0ms' } }] }],
  ['a window over 8784h (366 days)', { rate_limit_resources: [{ label: 'x', local: { interval: '8784h1ms' } }] }],
  [
    'a window too long for a Go duration',
    { rate_limit_resources: [{ label: 'x', local: { interval: '9999999999h' } }] },
  ],
  [
    'an output timeout of 600h',
    {
      streams: {
        s: { input: { http_server: {} }, output: { http_client: { url: 'http://a.example/', timeout: '600h' } } },
      },
    },
  ],
  [
    'an output timeout of 0s',
    {
      streams: {
        s: { input: { http_server: {} }, output: { http_client: { url: 'http://a.example/', timeout: '0s' } } },
      },
    },
  ],
  [
    'a processor timeout of 25h',
    {
      streams: {
        s: {
          input: { http_server: {} },
          pipeline: { processors: [{ http_client: { url: 'http://a.example/', timeout: '25h' } }] },
          output: { drop: {} },
        },
      },
    },
  ],
  [
    'a backoff starting at 0ms',
    {
      streams: {
        s: {
          input: { http_server: {} },
          output: { http_client: { url: 'http://a.example/', backoff: { initial_interval: '0ms' } } },
        },
      },
    },
  ],
  [
    'a backoff capped at 600h',
    {
      streams: {
        s: {
          input: { http_server: {} },
          output: { http_client: { url: 'http://a.example/', backoff: { max_interval: '600h' } } },
        },
      },
    },
  ],
  [
    'claim_idle of 0s',
    {
      streams: { s: { input: { redis_streams: { stream: 's', group: 'g', claim_idle: '0s' } }, output: { drop: {} } } },
    },
  ],
  [
    'claim_idle below 300ms',
    {
      streams: {
        s: { input: { redis_streams: { stream: 's', group: 'g', claim_idle: '299ms' } }, output: { drop: {} } },
      },
    },
  ],
  [
    'a generate interval of 600h',
    { streams: { s: { input: { generate: { interval: '600h' } }, output: { drop: {} } } } },
  ],
  ['two resources without a label', { rate_limit_resources: [{ local: { count: 1 } }, { local: { count: 2 } }] }],
  [
    'rate_limit "" with no unlabelled resource',
    {
      rate_limit_resources: res,
      streams: {
        s: { input: { http_server: {} }, output: { http_client: { url: 'http://a.example/', rate_limit: '' } } },
      },
    },
  ],
];
const good: [string, unknown][] = [
  [
    'every component',
    {
      rate_limit_resources: res,
      streams: {
        a: {
          input: { http_server: { path: '/in' } },
          pipeline: {
            processors: [
              { mapping: { move: { a: 'b' }, set: { 'x.y': { any: ['json', 1] } }, delete: ['c'] } },
              { http_client: { url: 'http://e.example/', rate_limit: 'peer', result_field: 'e' } },
            ],
          },
          output: out,
        },
        b: { input: { redis_streams: { stream: 's', group: 'g' } }, output: { stdout: {} } },
        c: { input: { generate: { interval: '1s', count: 3, message: 'hi' } }, output: { drop: {} } },
      },
    },
  ],
  ['a resource with defaults only', { rate_limit_resources: [{ label: 'x' }] }],
  [
    'a resource without a label (labelled "")',
    { rate_limit_resources: [{ local: { count: 2, interval: '1s' } }, { label: 'x' }] },
  ],
  [
    'a component naming the unlabelled resource with rate_limit ""',
    {
      rate_limit_resources: [{}],
      streams: {
        s: { input: { http_server: {} }, output: { http_client: { url: 'http://a.example/', rate_limit: '' } } },
      },
    },
  ],
  [
    'the largest durations: a 8784h window, 24h timers, 24h claim_idle and generate interval',
    {
      rate_limit_resources: [
        { label: 'month', local: { count: 2, interval: '600h' } },
        { label: 'year', local: { interval: '8784h' } },
      ],
      streams: {
        s: {
          input: { http_server: {} },
          pipeline: {
            processors: [
              {
                http_client: {
                  url: 'http://a.example/',
                  rate_limit: 'year',
                  timeout: '24h',
                  backoff: { initial_interval: '1h', max_interval: '24h' },
                },
              },
            ],
          },
          output: { http_client: { url: 'http://a.example/', rate_limit: 'month', timeout: '23h59m59.999s' } },
        },
        r: { input: { redis_streams: { stream: 's', group: 'g', claim_idle: '24h' } }, output: { drop: {} } },
        g: { input: { generate: { interval: '24h' } }, output: { drop: {} } },
      },
    },
  ],
  [
    'the smallest durations: 1ms windows and timers, 300ms claim_idle, a generate interval of 0s',
    {
      rate_limit_resources: [{ label: 'x', local: { interval: '1ms' } }],
      streams: {
        s: {
          input: { http_server: {} },
          output: {
            http_client: {
              url: 'http://a.example/',
              rate_limit: 'x',
              timeout: '1ms',
              backoff: { initial_interval: '1ms', max_interval: '1ms' },
            },
          },
        },
        r: { input: { redis_streams: { stream: 's', group: 'g', claim_idle: '300ms' } }, output: { drop: {} } },
        g: { input: { generate: { interval: '0s' } }, output: { drop: {} } },
      },
    },
  ],
];

describe('spec.streaming: zod and the kube-apiserver agree', () => {
  let ns: string;
  beforeAll(async () => {
    ns = await freshNamespace('streams');
  });

  test.each(bad)('both refuse: %s', async (_name, streaming) => {
    const doc = api(streaming);
    expect(validateDocument(doc).ok).toBe(false);
    const r = await kubectl(['apply', '--dry-run=server', '-n', ns, '-f', '-'], stringify(doc));
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('spec.streaming');
  });

  test.each(good)('both accept: %s', async (_name, streaming) => {
    const doc = api(streaming);
    const v = validateDocument(doc);
    expect(v.ok ? 'ok' : v.message).toBe('ok');
    const r = await kubectl(['apply', '--dry-run=server', '-n', ns, '-f', '-'], stringify(doc));
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
  });

  test.each([
    ['0s', 'from 1ms to 8784h'],
    ['0ms', 'from 1ms to 8784h'],
    ['9000h', 'from 1ms to 8784h'],
  ])(
    'a window of %s is refused by both naming spec.streaming.rate_limit_resources.0.local.interval',
    async (interval, rule) => {
      const doc = api({ rate_limit_resources: [{ label: 'x', local: { count: 2, interval } }] });
      const v = validateDocument(doc);
      expect(v.ok ? 'accepted' : v.message).toContain(
        `spec.streaming.rate_limit_resources.0.local.interval: must be a duration ${rule}`,
      );
      const r = await kubectl(['apply', '--dry-run=server', '-n', ns, '-f', '-'], stringify(doc));
      expect(r.stderr).toContain(
        `spec.streaming.rate_limit_resources[0].local.interval: Invalid value: "${interval}": must be a duration ${rule}`,
      );
    },
  );

  test('an output timeout of 600h is refused by both naming the field', async () => {
    const doc = api({
      streams: {
        s: { input: { http_server: {} }, output: { http_client: { url: 'http://a.example/', timeout: '600h' } } },
      },
    });
    const v = validateDocument(doc);
    expect(v.ok ? 'accepted' : v.message).toContain(
      'spec.streaming.streams.s.output.http_client.timeout: must be a duration from 1ms to 24h',
    );
    const r = await kubectl(['apply', '--dry-run=server', '-n', ns, '-f', '-'], stringify(doc));
    expect(r.stderr).toContain(
      'spec.streaming.streams[s].output.http_client.timeout: Invalid value: "600h": must be a duration from 1ms to 24h',
    );
  });

  test('a resource without a label reads back with label "" (the API server defaults it as zod does)', async () => {
    const doc = api({ rate_limit_resources: [{ local: { count: 2 } }] }, 'unlabelled');
    const v = validateDocument(doc);
    if (!v.ok || v.resource.kind !== 'ApiDefinition') throw new Error(v.ok ? v.resource.kind : v.message);
    expect(v.resource.spec.streaming?.rate_limit_resources).toEqual([
      { label: '', local: { count: 2, interval: '1s' } },
    ]);
    const r = await kubectl(['apply', '-n', ns, '-f', '-'], stringify(doc));
    expect(r.stderr).toBe('');
    const back = JSON.parse((await kubectl(['get', 'apidefinition', 'unlabelled', '-n', ns, '-o', 'json'])).stdout) as {
      spec: { streaming: unknown };
    };
    expect(back.spec.streaming).toEqual(v.resource.spec.streaming);
  });

  test('an unknown label is refused by zod with the exact field named (the API server names spec.streaming)', () => {
    const v = validateDocument(
      api({
        rate_limit_resources: res,
        streams: {
          s: { input: { http_server: {} }, output: { http_client: { url: 'http://a.example/', rate_limit: 'nope' } } },
        },
      }),
    );
    expect(v.ok).toBe(false);
    expect(v.ok ? '' : v.message).toContain('spec.streaming.streams.s.output.http_client.rate_limit');
  });
});

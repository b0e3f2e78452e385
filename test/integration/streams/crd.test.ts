/**
 * spec.streaming: the zod schema and the real kube-apiserver (generated CRD, CEL rules) agree on what
 * they refuse and accept, the unknown-label rule included (a CEL rule over streams and processors).
 */
import { stringify } from 'yaml';
import { validateDocument } from '../../../lib/manifests.js';
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
  ['max_in_flight 0', { streams: { s: { input: { http_server: {} }, output: { http_client: { url: 'http://a.example/', max_in_flight: 0 } } } } }],
  ['redis input without a stream', { streams: { s: { input: { redis_streams: { group: 'g' } }, output: { drop: {} } } } }],
  ['unknown label in the output', { rate_limit_resources: res, streams: { s: { input: { http_server: {} }, output: { http_client: { url: 'http://a.example/', rate_limit: 'nope' } } } } }],
  [
    'unknown label in a processor',
    { rate_limit_resources: res, streams: { s: { input: { http_server: {} }, pipeline: { processors: [{ mapping: {} }, { http_client: { url: 'http://a.example/', rate_limit: 'nope' } }] }, output: { drop: {} } } } },
  ],
  ['a label and no resources at all', { streams: { s: { input: { http_server: {} }, output: { http_client: { url: 'http://a.example/', rate_limit: 'x' } } } } }],
];
const good: [string, unknown][] = [
  [
    'every component',
    {
      rate_limit_resources: res,
      streams: {
        a: {
          input: { http_server: { path: '/in' } },
          pipeline: { processors: [{ mapping: { move: { a: 'b' }, set: { 'x.y': { any: ['json', 1] } }, delete: ['c'] } }, { http_client: { url: 'http://e.example/', rate_limit: 'peer', result_field: 'e' } }] },
          output: out,
        },
        b: { input: { redis_streams: { stream: 's', group: 'g' } }, output: { stdout: {} } },
        c: { input: { generate: { interval: '1s', count: 3, message: 'hi' } }, output: { drop: {} } },
      },
    },
  ],
  ['a resource with defaults only', { rate_limit_resources: [{ label: 'x' }] }],
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

  test('an unknown label is refused by zod with the exact field named (the API server names spec.streaming)', () => {
    const v = validateDocument(api({ rate_limit_resources: res, streams: { s: { input: { http_server: {} }, output: { http_client: { url: 'http://a.example/', rate_limit: 'nope' } } } } }));
    expect(v.ok).toBe(false);
    expect(v.ok ? '' : v.message).toContain('spec.streaming.streams.s.output.http_client.rate_limit');
  });
});

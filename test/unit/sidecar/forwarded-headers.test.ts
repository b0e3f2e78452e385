/** The header pairs sent upstream and back to the client (sidecar/proxy/upstream.ts). */
import type { IncomingMessage } from 'node:http';
import { headerObject, requestHeaders, responseHeaders } from '../../../sidecar/proxy/upstream.js';

const VALID_PARENT = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
const OURS = '00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01';

function client(headers: IncomingMessage['headers'], remoteAddress = '10.0.0.7'): IncomingMessage {
  return { headers, socket: { remoteAddress } } as unknown as IncomingMessage;
}

/** The pairs as [name, value] tuples, in order. */
function pairs(flat: readonly (string | string[])[]): [string, string | string[]][] {
  const out: [string, string | string[]][] = [];
  for (let i = 0; i < flat.length; i += 2) out.push([flat[i] as string, flat[i + 1]!]);
  return out;
}

describe('requestHeaders', () => {
  test('hop-by-hop headers and those the Connection header names are dropped; the rest pass in order', () => {
    const out = requestHeaders(
      client({
        host: 'api.example',
        connection: 'keep-alive, x-hop',
        'keep-alive': 'timeout=5',
        'x-hop': 'secret',
        te: 'trailers',
        'proxy-authorization': 'Basic x',
        expect: '100-continue',
        accept: 'application/json',
        authorization: 'key',
      }),
    );
    expect(pairs(out)).toEqual([
      ['accept', 'application/json'],
      ['authorization', 'key'],
      ['x-forwarded-for', '10.0.0.7'],
      ['x-forwarded-proto', 'http'],
      ['x-forwarded-host', 'api.example'],
    ]);
  });

  test("X-Forwarded-For gains the peer; the client's proto and host are kept; none is sent twice", () => {
    const out = requestHeaders(
      client({
        host: 'inner',
        'x-forwarded-for': '1.2.3.4',
        'x-forwarded-proto': 'https',
        'x-forwarded-host': 'outer.example',
      }),
    );
    expect(headerObject(out)).toEqual({
      'x-forwarded-for': '1.2.3.4, 10.0.0.7',
      'x-forwarded-proto': 'https',
      'x-forwarded-host': 'outer.example',
    });
    expect(out.filter((x, i) => i % 2 === 0 && x.startsWith('x-forwarded-'))).toHaveLength(3);
  });

  test('empty values are no values: X-Forwarded-For loses its empty elements, an empty proto or host is ours', () => {
    const out = headerObject(
      requestHeaders(
        client({ host: 'h', 'x-forwarded-for': '1.1.1.1, ', 'x-forwarded-proto': '', 'x-forwarded-host': '' }),
      ),
    );
    expect(out).toMatchObject({
      'x-forwarded-for': '1.1.1.1, 10.0.0.7',
      'x-forwarded-proto': 'http',
      'x-forwarded-host': 'h',
    });
    expect(headerObject(requestHeaders(client({ host: 'h', 'x-forwarded-for': ', ,' })))['x-forwarded-for']).toBe(
      '10.0.0.7',
    );
    expect(headerObject(requestHeaders(client({ host: 'h', 'x-forwarded-for': ', 2.2.2.2' })))['x-forwarded-for']).toBe(
      '2.2.2.2, 10.0.0.7',
    );
  });

  test('headers named constructor or __proto__ are headers like any other', () => {
    const out = headerObject(requestHeaders(client({ host: 'h', constructor: 'x', ['__proto__']: 'y' } as never)));
    expect(out.constructor).toBe('x');
    expect(Object.getOwnPropertyDescriptor(out, '__proto__')?.value).toBe('y');
  });

  test('a header of several lines is sent as several lines', () => {
    const out = requestHeaders(client({ host: 'h', 'x-multi': ['a', 'b'] }));
    expect(pairs(out).filter(([k]) => k === 'x-multi')).toEqual([
      ['x-multi', 'a'],
      ['x-multi', 'b'],
    ]);
    expect(headerObject(out)['x-multi']).toEqual(['a', 'b']);
  });

  test("our traceparent replaces the client's; its tracestate stays only with a parent that was continued", () => {
    const continued = headerObject(
      requestHeaders(client({ host: 'h', traceparent: VALID_PARENT, tracestate: 'v=1' }), OURS),
    );
    expect(continued.traceparent).toBe(OURS);
    expect(continued.tracestate).toBe('v=1');

    const broken = headerObject(requestHeaders(client({ host: 'h', traceparent: 'junk', tracestate: 'v=1' }), OURS));
    expect(broken.traceparent).toBe(OURS);
    expect(broken.tracestate).toBeUndefined();

    // no traceparent of ours: the client's context passes as it came
    const untouched = headerObject(requestHeaders(client({ host: 'h', traceparent: 'junk', tracestate: 'v=1' })));
    expect(untouched).toMatchObject({ traceparent: 'junk', tracestate: 'v=1' });
  });
});

describe('responseHeaders', () => {
  const rl = { limit: 10, remaining: -2, reset: 30 };

  test("the upstream's X-RateLimit-* and hop-by-hop headers are replaced by ours; other headers and lines stay", () => {
    const out = responseHeaders(
      {
        'content-type': 'text/plain',
        'content-length': '2',
        connection: 'keep-alive, x-up-hop',
        'x-up-hop': '1',
        'transfer-encoding': 'chunked',
        'x-ratelimit-limit': '999',
        'x-ratelimit-remaining': '999',
        'set-cookie': ['a=1', 'b=2'],
        'x-gone': undefined,
      },
      rl,
    );
    expect(pairs(out)).toEqual([
      ['content-type', 'text/plain'],
      ['content-length', '2'],
      ['set-cookie', ['a=1', 'b=2']],
      ['x-ratelimit-limit', '10'],
      ['x-ratelimit-remaining', '0'],
      ['x-ratelimit-reset', '30'],
    ]);
  });

  test('no numbers, no X-RateLimit-*; a 204 or a 101 loses its Content-Length', () => {
    expect(headerObject(responseHeaders({ 'content-length': '5', etag: 'x' }, undefined, 204))).toEqual({ etag: 'x' });
    expect(headerObject(responseHeaders({ 'content-length': '5', etag: 'x' }, undefined, 101))).toEqual({ etag: 'x' });
    expect(headerObject(responseHeaders({ 'content-length': '5' }, undefined, 200))).toEqual({ 'content-length': '5' });
  });
});

import { rootCode } from '../../../sidecar/proxy/gateway.js';

const coded = (message: string, code: string, cause?: Error): Error =>
  Object.assign(new Error(message, cause ? { cause } : {}), { code });

test("an error's own code when it has no cause", () => {
  expect(rootCode(coded('refused', 'ECONNREFUSED'))).toBe('ECONNREFUSED');
  expect(rootCode(new Error('no code'))).toBeUndefined();
});

test('the code of the first cause: a stream node:http2 cancelled because its TLS session failed', () => {
  const tls = coded('unable to verify the first certificate', 'UNABLE_TO_VERIFY_LEAF_SIGNATURE');
  expect(rootCode(coded('The pending stream has been canceled', 'ERR_HTTP2_STREAM_CANCEL', tls))).toBe(
    'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  );
  // a cause without a code leaves the wrapper's
  expect(rootCode(coded('cancelled', 'ERR_HTTP2_STREAM_CANCEL', new Error('why')))).toBe('ERR_HTTP2_STREAM_CANCEL');
});

test('a cycle of causes ends', () => {
  const a = coded('a', 'A');
  const b = coded('b', 'B', a);
  (a as { cause?: unknown }).cause = b;
  expect(['A', 'B']).toContain(rootCode(b));
});

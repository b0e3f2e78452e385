/** gRPC details of the gateway (docs/proxy.md, "gRPC"): grpc-timeout units, grpc-message encoding, the status table, fingerprints. */
import { grpcMessage, grpcStatusOf, ERRORS } from '../../../sidecar/proxy/respond.js';
import { grpcTimeoutMs } from '../../../sidecar/proxy/upstream-h2.js';
import { normalFingerprint } from '../../../sidecar/proxy/auth.js';

test('grpc-timeout: every unit, malformed values ignored', () => {
  expect(grpcTimeoutMs('2H')).toBe(7_200_000);
  expect(grpcTimeoutMs('3M')).toBe(180_000);
  expect(grpcTimeoutMs('5S')).toBe(5000);
  expect(grpcTimeoutMs('250m')).toBe(250);
  expect(grpcTimeoutMs('1500u')).toBeCloseTo(1.5);
  expect(grpcTimeoutMs('2000000n')).toBeCloseTo(2);
  for (const bad of [undefined, '', '5', 'S', '5s', '123456789S', '-1S', '1.5S'])
    expect(grpcTimeoutMs(bad)).toBeUndefined();
});

test('grpc-message: printable ASCII kept, % and the rest percent-encoded', () => {
  expect(grpcMessage('Rate Limit Exceeded')).toBe('Rate Limit Exceeded');
  expect(grpcMessage('100% café\n')).toBe('100%25 caf%C3%A9%0A');
});

test('the status table: limits and quotas 8, no key 16, key refused 7', () => {
  expect(grpcStatusOf(429, ERRORS.apiLimited)).toBe(8);
  expect(grpcStatusOf(403, ERRORS.quota)).toBe(8);
  expect(grpcStatusOf(401, ERRORS.authMissing)).toBe(16);
  expect(grpcStatusOf(403, ERRORS.disallowed)).toBe(7);
  expect(grpcStatusOf(404, ERRORS.notFound)).toBe(12);
  expect(grpcStatusOf(503, ERRORS.sessionStore)).toBe(14);
  expect(grpcStatusOf(504, ERRORS.timeout)).toBe(4);
  expect(grpcStatusOf(400, 'x')).toBe(13);
});

test('fingerprints compare without colons and case', () => {
  expect(normalFingerprint('AB:cd:0F')).toBe(normalFingerprint('abcd0f'));
});

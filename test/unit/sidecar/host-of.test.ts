/** server.address / server.port of a span from the client's Host header (sidecar/proxy/observe.ts hostOf). */
import { hostOf } from '../../../sidecar/proxy/observe.js';

describe('hostOf', () => {
  test.each([
    ['api.example.com', 'api.example.com', undefined],
    ['api.example.com:8080', 'api.example.com', 8080],
    ['127.0.0.1:1', '127.0.0.1', 1],
    ['127.0.0.1:65535', '127.0.0.1', 65535],
    ['[::1]:8080', '::1', 8080],
    ['[::1]', '::1', undefined],
    ['[2001:db8::2]:443', '2001:db8::2', 443],
    // a client writes what it likes: a port only when it is one
    ['evil:notaport', 'evil', undefined],
    ['x:99999999999999999999999', 'x', undefined],
    ['x:65536', 'x', undefined],
    ['x:0', 'x', undefined],
    ['x:', 'x', undefined],
    ['x:+80', 'x', undefined],
    ['x:8e1', 'x', undefined],
    ['[::1]junk', '::1', undefined],
    ['', '', undefined],
  ])('%j → address %j, port %j', (host, address, port) => {
    expect(hostOf(host)).toEqual({ address, port });
  });
});

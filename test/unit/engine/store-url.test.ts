import { Cluster, Redis } from 'ioredis';
import { STORE_CONNECT_TIMEOUT_MS, createStoreClient, parseStoreUrl } from '../../../lib/store/redis.js';
import { hostPort, parseHostPort } from '../../../lib/serve.js';

describe('store URLs', () => {
  test('redis:// and rediss://', () => {
    expect(parseStoreUrl('redis://:pw@10.0.0.1:6380/3')).toMatchObject({
      kind: 'single',
      hosts: [{ host: '10.0.0.1', port: 6380 }],
      password: 'pw',
      db: 3,
      tls: false,
    });
    expect(parseStoreUrl('rediss://cache')).toMatchObject({
      kind: 'single',
      hosts: [{ host: 'cache', port: 6379 }],
      tls: true,
    });
  });

  test('redis+sentinel://host:port,host2:port/mastername[/db]', () => {
    expect(parseStoreUrl('redis+sentinel://s1:26379,s2:26380/mymaster/2')).toMatchObject({
      kind: 'sentinel',
      hosts: [
        { host: 's1', port: 26379 },
        { host: 's2', port: 26380 },
      ],
      master: 'mymaster',
      db: 2,
    });
    expect(parseStoreUrl('redis+sentinel://s1/m').hosts).toEqual([{ host: 's1', port: 26379 }]);
    expect(() => parseStoreUrl('redis+sentinel://s1:26379')).toThrow(/names no master/);
  });

  test('redis+cluster://host:port,...', () => {
    expect(parseStoreUrl('redis+cluster://user:secret@n1:7000,n2:7001,[::1]:7002')).toMatchObject({
      kind: 'cluster',
      username: 'user',
      password: 'secret',
      hosts: [
        { host: 'n1', port: 7000 },
        { host: 'n2', port: 7001 },
        { host: '::1', port: 7002 },
      ],
    });
  });

  test('bad URLs are refused with a reason', () => {
    expect(() => parseStoreUrl('memcached://x')).toThrow(/scheme/);
    expect(() => parseStoreUrl('not a url')).toThrow(/bad store URL/);
    expect(() => parseStoreUrl('redis://h/notanumber')).toThrow(/database/);
    // a port that is not a number was taken for part of the host (ioredis then said only "Invalid URL")
    expect(() => parseStoreUrl('redis://127.0.0.1:notaport')).toThrow(
      /^bad host "127\.0\.0\.1:notaport" in store URL: expected HOST\[:PORT\]$/,
    );
    expect(() => parseStoreUrl('redis://h:99999')).toThrow(/bad host/);
    expect(parseStoreUrl('redis://[::1]:6380').hosts).toEqual([{ host: '::1', port: 6380 }]);
  });

  test('listen addresses: HOST:PORT, an IPv6 host in brackets', () => {
    expect(parseHostPort('127.0.0.1:8080', '--listen')).toEqual({ host: '127.0.0.1', port: 8080 });
    expect(parseHostPort('[::]:8080', '--listen')).toEqual({ host: '::', port: 8080 });
    expect(parseHostPort('[::1]:0', '--listen')).toEqual({ host: '::1', port: 0 });
    expect(parseHostPort(':8080', '--listen')).toEqual({ host: '0.0.0.0', port: 8080 });
    expect(() => parseHostPort('bogus', '--listen')).toThrow(/--listen: expected HOST:PORT/);
    expect(hostPort('::1', 8080)).toBe('[::1]:8080');
    expect(hostPort('127.0.0.1', 8080)).toBe('127.0.0.1:8080');
  });

  test('the client type follows the URL', () => {
    const single = createStoreClient('redis://127.0.0.1:1/0', { lazyConnect: true });
    const sentinel = createStoreClient('redis+sentinel://127.0.0.1:1/mymaster', { lazyConnect: true });
    const cluster = createStoreClient('redis+cluster://127.0.0.1:1,127.0.0.1:2', { lazyConnect: true });
    expect(single).toBeInstanceOf(Redis);
    expect(sentinel).toBeInstanceOf(Redis);
    expect((sentinel as Redis).options.sentinels).toEqual([{ host: '127.0.0.1', port: 1 }]);
    expect((sentinel as Redis).options.name).toBe('mymaster');
    expect(cluster).toBeInstanceOf(Cluster);
    for (const c of [single, sentinel, cluster]) c.disconnect();
  });

  test('a connection attempt is given up after 2 s (a SYN to a Redis pod that is gone gets no answer), unless told otherwise', () => {
    const single = createStoreClient('redis://127.0.0.1:1/0', { lazyConnect: true });
    const sentinel = createStoreClient('redis+sentinel://127.0.0.1:1/mymaster', { lazyConnect: true });
    const cluster = createStoreClient('redis+cluster://127.0.0.1:1,127.0.0.1:2', { lazyConnect: true });
    const given = createStoreClient('redis://127.0.0.1:1/0', { lazyConnect: true, connectTimeout: 500 });
    expect(STORE_CONNECT_TIMEOUT_MS).toBe(2000);
    expect((single as Redis).options.connectTimeout).toBe(2000);
    expect((sentinel as Redis).options.connectTimeout).toBe(2000);
    expect((cluster as Cluster).options.redisOptions?.connectTimeout).toBe(2000);
    expect((given as Redis).options.connectTimeout).toBe(500);
    for (const c of [single, sentinel, cluster, given]) c.disconnect();
  });
});

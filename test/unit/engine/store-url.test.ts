import { Cluster, Redis } from 'ioredis';
import { createStoreClient, parseStoreUrl } from '../../../lib/store/redis.js';

describe('store URLs', () => {
  test('redis:// and rediss://', () => {
    expect(parseStoreUrl('redis://:pw@10.0.0.1:6380/3')).toMatchObject({ kind: 'single', hosts: [{ host: '10.0.0.1', port: 6380 }], password: 'pw', db: 3, tls: false });
    expect(parseStoreUrl('rediss://cache')).toMatchObject({ kind: 'single', hosts: [{ host: 'cache', port: 6379 }], tls: true });
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
});

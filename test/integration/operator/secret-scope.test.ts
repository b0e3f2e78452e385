/**
 * The controller reads only the Secrets its resources refer to or that carry its label (docs/contract.md#faults): its
 * Secret informer selects `gw.io/secret`, so an unrelated Secret of the namespace never enters its cache;
 * a user's unlabelled Secret named by a secretRef is read by name (GET) and still serves its key; a
 * labelled one is watched (a change reaches Redis at once); a generated one carries the label.
 */
import { jest } from '@jest/globals';
import type { Redis } from 'ioredis';
import { pino } from 'pino';
import { sha256hex } from '../../../lib/hash.js';
import { loadKubeConnection } from '../../../lib/kube/connection.js';
import { createStoreClient } from '../../../lib/store/redis.js';
import { SESSION_PREFIX } from '../../../contract/sessions.js';
import { SECRET_LABEL } from '../../../contract/annotations.js';
import { Operator } from '../../../controller/operator.js';
import { freshNamespace, kubeconfig } from '../../helpers/kube.js';
import { freshRedis, redisUrl } from '../../helpers/redis.js';
import { accessKey, apply, eventually, getJson, secret } from './helpers.js';

jest.setTimeout(60_000);

test('an unrelated Secret never enters the cache; referenced ones are read by name, labelled ones watched', async () => {
  const ns = await freshNamespace('secret-scope');
  const redis: Redis = await freshRedis();
  const store = createStoreClient(redisUrl());
  const labelled = (name: string, data: Record<string, string>) => secret(name, data);
  await apply(
    ns,
    secret('unrelated', { password: 'not-for-gw' }, { watched: false }),
    secret('user-key', { key: 'unlabelled-user-key' }, { watched: false }),
    labelled('watched-key', { key: 'labelled-key-1' }),
  );
  const op = new Operator({
    conn: await loadKubeConnection(kubeconfig()),
    logger: pino({ level: 'silent' }),
    namespace: ns,
    redis: store,
  });
  try {
    await op.start();
    await apply(
      ns,
      accessKey('ku', { secretRef: { name: 'user-key', key: 'key' }, rate: 1, per: 1 }),
      accessKey('kl', { secretRef: { name: 'watched-key', key: 'key' }, rate: 1, per: 1 }),
      accessKey('kg', { secretRef: { name: 'generated-key', key: 'key' }, rate: 1, per: 1 }),
    );
    const has = async (raw: string): Promise<boolean> => (await redis.exists(SESSION_PREFIX + sha256hex(raw))) === 1;
    await eventually(
      async () => (await has('unlabelled-user-key')) && (await has('labelled-key-1')),
      20_000,
      'sessions',
    );
    const gen = (await eventually(async () => getJson(ns, 'secret', 'generated-key'), 20_000, 'generated Secret')) as {
      metadata: { labels?: Record<string, string> };
    };
    expect(gen.metadata.labels?.[SECRET_LABEL]).toBe('true');
    await eventually(async () => op.cachedSecrets().includes(`${ns}/generated-key`), 10_000, 'generated one cached');
    // a change of the labelled Secret reaches Redis through the watch
    await apply(ns, labelled('watched-key', { key: 'labelled-key-2' }));
    await eventually(async () => has('labelled-key-2'), 10_000, 'rotated key');
    const cached = op.cachedSecrets();
    expect(cached).toContain(`${ns}/watched-key`);
    expect(cached).not.toContain(`${ns}/unrelated`);
    expect(cached).not.toContain(`${ns}/user-key`); // read by name, not kept
    expect(cached.every((n) => n.startsWith(`${ns}/`))).toBe(true);
  } finally {
    await op.stop();
    store.disconnect();
    redis.disconnect();
  }
});

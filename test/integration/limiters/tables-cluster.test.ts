/**
 * The behaviour tables of the sliding log (script and pipeline, smoothing included), the sentinel variant
 * and the fixed window on a real 3-master Redis Cluster: a bucket's keys share one hash tag, so every
 * script and pipeline runs on one node (no CROSSSLOT) and answers as the memory implementation does.
 */
import { RedisFixedWindow } from '../../../limiters/fixed-window.js';
import { RedisSentinel } from '../../../limiters/sentinel.js';
import { RedisSlidingLog } from '../../../limiters/sliding-log.js';
import { suiteRedisCluster } from '../../helpers/redis.js';
import { fixedWindowCases } from '../../unit/engine/fixed-window-cases.js';
import { sentinelCases } from '../../unit/engine/sentinel-cases.js';
import { slidingLogCases } from '../../unit/engine/sliding-log-cases.js';

const cc = suiteRedisCluster();

for (const transactional of [true, false])
  slidingLogCases(`Redis Cluster, ${transactional ? 'script' : 'pipeline'}`, (clock, o) => {
    const opts = { transactional, smoothingEnabled: o.smoothingEnabled ?? true };
    return new RedisSlidingLog(cc(), clock, opts, o.onSmoothing);
  });

sentinelCases('Redis Cluster', (clock, onSmoothing) => {
  const s = new RedisSentinel(cc(), clock, { smoothingEnabled: true }, onSmoothing);
  return { limiter: s, settle: () => s.settled() };
});

fixedWindowCases('Redis Cluster', (clock) => new RedisFixedWindow(cc(), clock));

import { MemorySentinel } from '../../../limiters/sentinel.js';
import { sentinelCases } from './sentinel-cases.js';

sentinelCases('memory', (clock, onSmoothing) => ({
  limiter: new MemorySentinel(clock, onSmoothing),
  settle: async () => undefined,
}));

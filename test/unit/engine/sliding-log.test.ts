import { MemorySlidingLog } from '../../../limiters/sliding-log.js';
import { slidingLogCases } from './sliding-log-cases.js';

slidingLogCases('memory', (clock, o) => new MemorySlidingLog(clock, o.onSmoothing, o.smoothingEnabled));

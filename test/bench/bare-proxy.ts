/** The bare Node.js baseline of `make bench`: node:http + an undici Pool, pass-through, nothing else. */
import { createServer } from 'node:http';
import { Pool } from 'undici';
import { passThrough } from './bare-forward.js';

const pool = new Pool(process.argv[3]!, { connections: 128, pipelining: 1, keepAliveTimeout: 30_000 });
createServer(passThrough(pool)).listen(Number(process.argv[2]), '127.0.0.1', () => console.log('bare proxy ready'));

/** The limiters' store: memory (ExpiringMap) or Redis (a StoreClient), with one key layout. */
export { ExpiringMap } from './memory.js';
export { createStoreClient, parseStoreUrl, type ParsedStoreUrl, type StoreClient } from './redis.js';
export { defineScript, type ScriptRunner } from './scripts.js';

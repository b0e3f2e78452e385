/**
 * Lua scripts on the store client through ioredis defineCommand: EVALSHA with an automatic EVAL
 * fallback (NOSCRIPT), one round trip. Time is always passed in as an argument (the injected clock),
 * never read with Redis TIME, so tests control it.
 */
import type { StoreClient } from './redis.js';

export type ScriptRunner<R> = (keys: string[], args: (string | number)[]) => Promise<R>;

type WithCommands = StoreClient & Record<string, unknown>;

export function defineScript<R>(client: StoreClient, name: string, numberOfKeys: number, lua: string): ScriptRunner<R> {
  const c = client as WithCommands;
  if (typeof c[name] !== 'function') client.defineCommand(name, { numberOfKeys, lua });
  const fn = c[name] as (...a: (string | number)[]) => Promise<R>;
  return (keys, args) => {
    if (keys.length !== numberOfKeys)
      throw new Error(`script ${name}: expected ${numberOfKeys} keys, got ${keys.length}`);
    return fn.call(client, ...keys, ...args);
  };
}

/**
 * Lua scripts on the store client through ioredis defineCommand: EVALSHA with an automatic EVAL
 * fallback (NOSCRIPT), one round trip. Time is always passed in as an argument (the injected clock),
 * never read with Redis TIME, so tests control it. Each script is a `.lua` file beside the module that
 * runs it, read once when that module loads (the build copies them into dist/: Makefile, Dockerfile).
 */
import type { StoreClient } from './redis.js';
const { readFileSync } = process.getBuiltinModule('node:fs');

/**
 * The text of the Lua script `file`, beside the module at `moduleUrl` (its import.meta.url), with each
 * `{{NAME}}` replaced by `constants[NAME]` (numbers the TypeScript side owns); an unknown name is an error.
 */
export function luaScript(moduleUrl: string, file: string, constants: Record<string, number> = {}): string {
  return readFileSync(new URL(file, moduleUrl), 'utf8').replace(/\{\{(\w+)\}\}/g, (_, name: string) => {
    const v = constants[name];
    if (v === undefined) throw new Error(`${file}: no value for {{${name}}}`);
    return String(v);
  });
}

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

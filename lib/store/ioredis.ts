/**
 * ioredis, loaded on first use instead of at import: a gateway without a store (`gw standalone`'s
 * default, a keyless sidecar without --redis) never pays for its module's memory (docs/benchmarks.md, "Memory
 * under load").
 * ioredis is CommonJS, so `require` is synchronous and returns the instance an `import` would.
 */
const { createRequire } = process.getBuiltinModule('node:module');

type Ioredis = typeof import('ioredis');
let loaded: Ioredis | undefined;

export function ioredis(): Ioredis {
  return (loaded ??= createRequire(import.meta.url)('ioredis') as Ioredis);
}

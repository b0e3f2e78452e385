/**
 * The parts of undici the product uses, loaded from their own files instead of the package index.
 * undici's index loads every dispatcher, fetch, WebSocket, the cache and mock layers: ~21 MB of RSS
 * in each process; Pool, Agent and the request/stream APIs alone cost ~8 MB (docs/dependencies.md).
 * The index also installs `request`/`stream` on Dispatcher.prototype; without it they are called here
 * with the dispatcher as `this`, which is what the prototype methods do. undici is pinned to an exact
 * version in package.json because these paths are not its public entry point; a unit test
 * (test/unit/undici-lite.test.ts) checks each export is the very object the index exports.
 */
import type * as U from 'undici';
const { createRequire } = process.getBuiltinModule('node:module');

const require = createRequire(import.meta.url);

export const Pool = require('undici/lib/dispatcher/pool.js') as typeof U.Pool;
export const Agent = require('undici/lib/dispatcher/agent.js') as typeof U.Agent;
export const errors = require('undici/lib/core/errors.js') as typeof U.errors;
export type Pool = U.Pool;
export type Agent = U.Agent;

type ApiRequest = (this: U.Dispatcher, opts: U.Dispatcher.RequestOptions) => Promise<U.Dispatcher.ResponseData>;
const apiRequest = require('undici/lib/api/api-request.js') as ApiRequest;

export type RequestOptions = Omit<U.Dispatcher.RequestOptions, 'origin' | 'path' | 'method'> & {
  method?: U.Dispatcher.HttpMethod;
};

/** `undici.request(url, { dispatcher, ... })` with the dispatcher given explicitly. */
export function request(
  dispatcher: U.Dispatcher,
  url: string | URL,
  opts: RequestOptions = {},
): Promise<U.Dispatcher.ResponseData> {
  const u = typeof url === 'string' ? new URL(url) : url;
  return apiRequest.call(dispatcher, {
    ...opts,
    origin: u.origin,
    path: u.pathname + u.search,
    method: opts.method ?? 'GET',
  });
}

/** `dispatcher.request(opts)`: origin and path sent exactly as given (no URL parsing, so "%2E%2E" stays). */
export function dispatchRequest(
  dispatcher: U.Dispatcher,
  opts: U.Dispatcher.RequestOptions,
): Promise<U.Dispatcher.ResponseData> {
  return apiRequest.call(dispatcher, opts);
}

export type { Dispatcher } from 'undici';

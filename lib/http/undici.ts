/**
 * The parts of undici the product uses, through its public entry point. `request` takes the dispatcher
 * explicitly; `dispatchRequest` sends origin and path exactly as given (no URL parsing, so "%2E%2E" stays).
 */
import * as undici from 'undici';
import type { Dispatcher } from 'undici';

export const { Pool, Agent, errors } = undici;
export type Pool = undici.Pool;
export type Agent = undici.Agent;

export type RequestOptions = Omit<Dispatcher.RequestOptions, 'origin' | 'path' | 'method'> & {
  method?: Dispatcher.HttpMethod;
};

/** `undici.request(url, { dispatcher, ... })` with the dispatcher given explicitly. */
export function request(
  dispatcher: Dispatcher,
  url: string | URL,
  opts: RequestOptions = {},
): Promise<Dispatcher.ResponseData> {
  return undici.request(url, { ...opts, dispatcher, method: opts.method ?? 'GET' });
}

/** `dispatcher.request(opts)`: origin and path sent exactly as given (no URL parsing, so "%2E%2E" stays). */
export function dispatchRequest(
  dispatcher: Dispatcher,
  opts: Dispatcher.RequestOptions,
): Promise<Dispatcher.ResponseData> {
  return dispatcher.request(opts);
}

export type { Dispatcher } from 'undici';

/** What every facade route handler gets. */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Dispatcher } from '../lib/http/undici.js';
import type { Logger } from '../lib/logger.js';
import type { GatewayOptionsT } from '../lib/options.js';
import type { ResourceBackend } from './backend.js';
import type { CompiledConfig } from '../contract/config.js';
import type { OAuthServer } from '../stores/oauth/grants.js';

export interface FacadeContext {
  backend: ResourceBackend;
  options: GatewayOptionsT;
  /** Namespace APIs are looked up in; undefined = every namespace. */
  apiNamespace: string | undefined;
  /** Namespace facade-imported AccessKeys are created in. */
  keyNamespace: string;
  /** Normalised origins (scheme://host[:port]) POST /api/proxy may call. */
  gatewayOrigins: ReadonlySet<string>;
  /** undici dispatcher for POST /api/proxy (closed with the server). */
  dispatcher: Dispatcher;
  logger: Logger;
  /** OAuth codes and introspection (absent: gw facade without --redis). */
  oauth?: FacadeOAuth;
  /** Serialises writes per resource (keys by hash, clients by api/client id). */
  locks: KeyedLock;
}

/** What the OAuth routes need: the token rules and the compiled APIs (their oauth settings). */
export interface FacadeOAuth {
  server: OAuthServer;
  config: () => CompiledConfig;
}

export interface RouteArgs {
  req: IncomingMessage;
  res: ServerResponse;
  ctx: FacadeContext;
  params: Record<string, string>;
  query: URLSearchParams;
}

export type Handler = (args: RouteArgs) => Promise<void>;

export interface Route {
  /** OpenAPI-style template, e.g. /gw/keys/{keyID}; used for matching and in logs (never the raw path). */
  template: string;
  methods: Partial<Record<string, Handler>>;
}

/** Runs fn after every earlier fn of the same key finished (check-then-write without races). */
export class KeyedLock {
  private readonly tails = new Map<string, Promise<unknown>>();

  run<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const prev = this.tails.get(key) ?? Promise.resolve();
    const next = prev.then(fn, fn);
    const tail = next.catch(() => undefined);
    this.tails.set(key, tail);
    void tail.then(() => {
      if (this.tails.get(key) === tail) this.tails.delete(key);
    });
    return next;
  }
}

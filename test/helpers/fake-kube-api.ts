/**
 * A scripted API server for unit tests of lib/kube consumers: lists answer in order (none left → 503);
 * each watch plays its events, then ends, fails, or (with `hang`, or when none is scripted) waits for abort.
 */
import { KubeApiError, type KubeApi, type Query } from '../../lib/kube/api.js';

export class FakeKubeApi implements KubeApi {
  lists: { items: unknown[]; rv: string; cont?: string }[] = [];
  watches: { events: unknown[]; fail?: Error; hang?: boolean }[] = [];
  calls: { kind: 'list' | 'watch'; path: string; query: Query }[] = [];

  get listCalls(): Query[] {
    return this.calls.filter((c) => c.kind === 'list').map((c) => c.query);
  }
  get watchCalls(): Query[] {
    return this.calls.filter((c) => c.kind === 'watch').map((c) => c.query);
  }

  async get(path: string, query?: Query): Promise<unknown> {
    this.calls.push({ kind: 'list', path, query: query ?? {} });
    const l = this.lists.shift();
    if (!l) throw new KubeApiError('connect ECONNREFUSED', 503);
    return { metadata: { resourceVersion: l.rv, continue: l.cont }, items: l.items };
  }
  async watch(path: string, query: Query, onEvent: (e: unknown) => void, signal: AbortSignal): Promise<void> {
    this.calls.push({ kind: 'watch', path, query });
    const w = this.watches.shift() ?? { events: [], hang: true };
    for (const e of w.events) if (!signal.aborted) onEvent(e);
    if (w.fail) throw w.fail;
    if (w.hang && !signal.aborted) await new Promise<void>((r) => signal.addEventListener('abort', () => r()));
  }
  post = async (): Promise<unknown> => undefined;
  put = async (): Promise<unknown> => undefined;
  patch = async (): Promise<unknown> => undefined;
  delete = async (): Promise<unknown> => undefined;
  server = (): string => 'https://fake';
}

/** Polls `fn` every 10 ms until it holds; throws after `ms`. */
export async function until(fn: () => boolean, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!fn()) {
    if (Date.now() > end) throw new Error('timeout');
    await new Promise((r) => setTimeout(r, 10));
  }
}

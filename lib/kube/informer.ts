/**
 * Informer: list (paged) + watch of one resource, with a local cache and change callbacks. A watch
 * simply ends (on errors, timeouts, and with 410 Gone when its resourceVersion is too old), which is
 * why client-node's informer needs a restart loop around it; this one is that loop around a plain watch
 * stream (api.ts; client-node's generated code is not loaded, docs/operator.md "Scale"): an ended
 * watch resumes from the last seen
 * resourceVersion (bookmarks keep it fresh), 410 relists, any error relists after an exponential
 * backoff. A relist diffs against the cache, so deletions missed while disconnected are delivered.
 * Objects are only checked for the envelope (metadata) here; each reconciler validates the kind.
 */
import { z } from 'zod';
import type { Logger } from '../logger.js';
import { backoffDelay } from '../backoff.js';
import { codeOf, resourcePath, type KubeApi } from './api.js';

const { setTimeout: delay } = process.getBuiltinModule('node:timers/promises');

export const ObjectMetaEnvelope = z.looseObject({
  name: z.string(),
  namespace: z.string().optional(),
  uid: z.string().optional(),
  resourceVersion: z.string().optional(),
  generation: z.number().int().optional(),
  deletionTimestamp: z.string().optional(),
  finalizers: z.array(z.string()).optional(),
  labels: z.record(z.string(), z.string()).optional(),
  annotations: z.record(z.string(), z.string()).optional(),
});
export const KubeObjectSchema = z.looseObject({ metadata: ObjectMetaEnvelope });
export type KubeObject = z.infer<typeof KubeObjectSchema>;

const WatchEvent = z.object({ type: z.string(), object: z.unknown() });

const ListSchema = z.object({
  metadata: z.looseObject({ resourceVersion: z.string().optional(), continue: z.string().optional() }),
  items: z.array(z.unknown()).nullable().optional(),
});

export interface ResourceRef {
  group: string;
  version: string;
  plural: string;
  kind: string;
}

export type ChangeType = 'add' | 'update' | 'delete';

export interface InformerOptions {
  api: KubeApi;
  resource: ResourceRef;
  namespace?: string;
  fieldSelector?: string;
  labelSelector?: string;
  logger: Logger;
  onChange: (type: ChangeType, obj: KubeObject, old?: KubeObject) => void;
  pageSize?: number;
  /** Each failed list or watch, with the backoff before the retry; replaces the default warn log line. */
  onError?: (err: Error, retryInMs: number) => void;
}

export const objectKey = (o: { metadata: { namespace?: string; name: string } }): string =>
  `${o.metadata.namespace ?? ''}/${o.metadata.name}`;

class Gone extends Error {}

/**
 * The envelope of an object from the API server: metadata validated (zod), the rest kept as received
 * (each reconciler validates its kind), without copying spec and status. managedFields are often the
 * largest part of an object and nothing here reads them: dropped before caching.
 */
export function envelope(raw: unknown): KubeObject | undefined {
  if (!raw || typeof raw !== 'object') return undefined;
  const o = raw as { metadata?: { managedFields?: unknown } };
  if (o.metadata && typeof o.metadata === 'object') delete o.metadata.managedFields;
  const m = ObjectMetaEnvelope.safeParse(o.metadata);
  if (!m.success) return undefined;
  (o as { metadata: unknown }).metadata = m.data;
  return o as KubeObject;
}

/** resourceVersions are opaque, but etcd's are integers: compare them as such when they are. */
function newer(a: string | undefined, b: string | undefined): boolean {
  if (!a || !b || !/^\d+$/.test(a) || !/^\d+$/.test(b)) return true;
  return BigInt(a) > BigInt(b);
}

export class Informer {
  private readonly cache = new Map<string, KubeObject>();
  private readonly byNs = new Map<string, Map<string, KubeObject>>();
  private resourceVersion = '';
  private stopped = false;
  private synced = false;
  private abort?: AbortController;
  /** Aborted by stop(): ends a pause between watches or after a failure at once. */
  private readonly stopping = new AbortController();
  private failures = 0;
  private readonly syncedWaiters: (() => void)[] = [];

  constructor(private readonly o: InformerOptions) {}

  get kind(): string {
    return this.o.resource.kind;
  }

  hasSynced(): boolean {
    return this.synced;
  }

  whenSynced(): Promise<void> {
    return this.synced ? Promise.resolve() : new Promise((r) => this.syncedWaiters.push(r));
  }

  get(namespace: string, name: string): KubeObject | undefined {
    return this.cache.get(`${namespace}/${name}`);
  }

  list(namespace?: string): KubeObject[] {
    if (namespace === undefined) return [...this.cache.values()];
    return [...(this.byNs.get(namespace)?.values() ?? [])];
  }

  private put(k: string, obj: KubeObject): void {
    this.cache.set(k, obj);
    const ns = obj.metadata.namespace ?? '';
    let m = this.byNs.get(ns);
    if (!m) this.byNs.set(ns, (m = new Map()));
    m.set(obj.metadata.name, obj);
  }

  private drop(k: string, obj: KubeObject): void {
    this.cache.delete(k);
    const ns = obj.metadata.namespace ?? '';
    const m = this.byNs.get(ns);
    m?.delete(obj.metadata.name);
    if (m?.size === 0) this.byNs.delete(ns);
  }

  /**
   * Write-through: the API server's answer to our own write, so the next reconcile (which may run
   * before the watch delivers it) does not see a stale object and write again. Older versions lose.
   */
  remember(raw: unknown): void {
    const obj = envelope(raw);
    if (!obj) return;
    const k = objectKey(obj);
    const cur = this.cache.get(k);
    if (cur && !newer(obj.metadata.resourceVersion, cur.metadata.resourceVersion)) return;
    this.put(k, obj);
  }

  size(): number {
    return this.cache.size;
  }

  start(): void {
    void this.run();
  }

  stop(): void {
    this.stopped = true;
    this.abort?.abort();
    this.stopping.abort();
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      try {
        await this.relist();
        this.failures = 0;
        await this.watchUntilGone();
      } catch (e) {
        if (this.stopped) return;
        if (e instanceof Gone) {
          this.o.logger.info({ kind: this.kind }, 'watch expired (410 Gone); relisting');
          continue;
        }
        this.failures++;
        const ms = backoffDelay(this.failures, 500, 30_000);
        if (this.o.onError) this.o.onError(e as Error, ms);
        else
          this.o.logger.warn(
            { kind: this.kind, err: (e as Error).message, retryInMs: ms },
            'list/watch failed; retrying',
          );
        await this.pause(ms);
      }
    }
  }

  private async relist(): Promise<void> {
    const path = resourcePath(this.o.resource, this.o.namespace);
    const seen = new Map<string, KubeObject>();
    let cont: string | undefined;
    let rv = '';
    do {
      const page = ListSchema.parse(
        await this.o.api.get(path, {
          limit: this.o.pageSize ?? 500,
          continue: cont,
          fieldSelector: this.o.fieldSelector,
          labelSelector: this.o.labelSelector,
        }),
      );
      for (const item of page.items ?? []) {
        const obj = envelope(item);
        if (!obj) continue;
        if (!obj.metadata.namespace && this.o.namespace) obj.metadata.namespace = this.o.namespace;
        seen.set(objectKey(obj), obj);
      }
      cont = page.metadata.continue || undefined;
      rv = page.metadata.resourceVersion ?? rv;
    } while (cont && !this.stopped);
    for (const [k, obj] of seen) {
      const old = this.cache.get(k);
      this.put(k, obj);
      if (!old) this.o.onChange('add', obj);
      else if (old.metadata.resourceVersion !== obj.metadata.resourceVersion) this.o.onChange('update', obj, old);
    }
    for (const [k, old] of [...this.cache]) {
      if (!seen.has(k)) {
        this.drop(k, old);
        this.o.onChange('delete', old);
      }
    }
    this.resourceVersion = rv;
    if (!this.synced) {
      this.synced = true;
      for (const w of this.syncedWaiters.splice(0)) w();
    }
  }

  /** Watches (resuming after each normal end) until 410 Gone or an error. */
  private async watchUntilGone(): Promise<void> {
    while (!this.stopped) {
      const started = Date.now();
      await this.watchOnce();
      // a watch the server ends at once, over and over, must not spin
      if (Date.now() - started < 1000 && !this.stopped) await this.pause(1000);
    }
  }

  /** Resolves after `ms`, or at once when stop() is called. */
  private pause(ms: number): Promise<void> {
    return delay(ms, undefined, { signal: this.stopping.signal }).catch(() => undefined);
  }

  private async watchOnce(): Promise<void> {
    const query: Record<string, string | number | boolean> = {
      resourceVersion: this.resourceVersion,
      allowWatchBookmarks: true,
      timeoutSeconds: 240,
    };
    if (this.o.fieldSelector) query.fieldSelector = this.o.fieldSelector;
    if (this.o.labelSelector) query.labelSelector = this.o.labelSelector;
    const ac = new AbortController();
    this.abort = ac;
    if (this.stopped) return;
    let gone = false;
    try {
      await this.o.api.watch(
        resourcePath(this.o.resource, this.o.namespace),
        query,
        (ev) => {
          const e = WatchEvent.safeParse(ev);
          if (!e.success) return;
          if (e.data.type === 'ERROR') {
            if ((e.data.object as { code?: number } | undefined)?.code === 410) gone = true;
            ac.abort();
            return;
          }
          this.apply(e.data.type, e.data.object);
        },
        ac.signal,
      );
    } catch (err) {
      if (gone || codeOf(err) === 410) throw new Gone('410');
      if (this.stopped || ac.signal.aborted) return;
      throw err;
    }
    if (gone) throw new Gone('410');
  }

  private apply(type: string, raw: unknown): void {
    const obj = envelope(raw);
    if (!obj) return;
    if (obj.metadata.resourceVersion) this.resourceVersion = obj.metadata.resourceVersion;
    if (type === 'BOOKMARK') return;
    if (!obj.metadata.namespace && this.o.namespace) obj.metadata.namespace = this.o.namespace;
    const k = objectKey(obj);
    const old = this.cache.get(k);
    if (type === 'DELETED') {
      this.drop(k, old ?? obj);
      this.o.onChange('delete', obj, old); // the object's final state
    } else if (type === 'ADDED' || type === 'MODIFIED') {
      this.put(k, obj);
      this.o.onChange(old ? 'update' : 'add', obj, old);
    }
  }
}

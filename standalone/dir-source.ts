/**
 * Watches a manifests directory and keeps a snapshot of its resources, at a cost that follows what
 * changed rather than the size of the directory:
 * - fs.watch (one per directory) names the paths that changed; a burst of changes is coalesced (a quiet period
 *   of DEBOUNCE_MS, at most MAX_DELAY_MS after the first change, so one edit applies well within 1 s);
 * - only those paths are looked at again (their file signature: mtime, ctime, size, inode), and only files
 *   whose signature changed are read and parsed — off the event loop (standalone/parse-files.ts);
 * - anything the watch cannot describe as a plain file (a directory, a symbolic link, a path with a
 *   problem) triggers a full listing, made through libuv's pool (lib/manifest-walk.ts), re-reading only
 *   the files whose signature changed; a slow full listing runs anyway as a safety net (RESCAN_MS, or
 *   POLL_MS while fs.watch is unavailable or the directory cannot be read).
 * Bad documents and paths that cannot be read are reported naming the file and skipped; the good ones
 * are kept, and a file that turns bad keeps serving its last good version. Reads are serialised, and
 * listeners are awaited: when a read resolves, its snapshot has been applied.
 */
import type { BigIntStats, FSWatcher } from 'node:fs';
import type { AnyResource } from '../crds/kinds.js';
import type { Logger } from '../lib/logger.js';
import { formatLoadError, type FileLoad, type LoadError } from './manifests.js';
import {
  fileSignature,
  isProblem,
  listManifestsAsync,
  MANIFEST_EXT,
  type ListedEntry,
  type ListedFile,
  type Listing,
} from '../lib/manifest-walk.js';
import { emptySnapshot, type ResourceSnapshot } from '../compiler/snapshot.js';
import { ManifestParser } from './parse-files.js';
import { Yielder } from '../lib/yielder.js';
const { watch, readdirSync } = process.getBuiltinModule('node:fs');
const { lstat, stat } = process.getBuiltinModule('node:fs/promises');
const { sep, join, dirname } = process.getBuiltinModule('node:path');

/** A burst of changes is applied once it has been quiet this long… */
const DEBOUNCE_MS = 50;
/**
 * …or this long after its first change, whichever comes first (a burst of thousands of files is applied in
 * a few steps, each well within the 1 s of docs/contract.md#commands-and-flags).
 */
const MAX_DELAY_MS = 400;
/** The safety-net full listing while fs.watch reports changes, and when it cannot. */
const RESCAN_MS = 30_000;
/** A first read of a directory holding more entries than this starts the parse worker before listing it. */
const PREWARM_ENTRIES = 256;
const POLL_MS = 1_000;

type Listener = (s: ResourceSnapshot) => void | Promise<void>;

/** The manifest file of each resource read (a resource object comes from one file for its whole life). */
const fileOf = new WeakMap<AnyResource, string>();
const FILES = { get: (r: AnyResource): string | undefined => fileOf.get(r) };
const NONE: readonly AnyResource[] = [];

/** One bit per kind: which of a snapshot's lists a file's resources belong to. */
const KIND_BIT: Record<AnyResource['kind'], number> = {
  ApiDefinition: 1,
  Policy: 2,
  AccessKey: 4,
  OAuthClient: 8,
  Secret: 16,
};
const ALL_KINDS = 31;
const kindMasks = new WeakMap<readonly AnyResource[], number>();

function kindsOf(list: readonly AnyResource[]): number {
  let m = kindMasks.get(list);
  if (m === undefined) {
    m = 0;
    for (const r of list) m |= KIND_BIT[r.kind];
    kindMasks.set(list, m);
  }
  return m;
}

const SEP = sep.charCodeAt(0);
/** Where a path's character at `i` sorts: its end first, then a separator (a shorter name), then the code unit. */
const rank = (s: string, i: number): number => (i >= s.length ? 0 : s.charCodeAt(i) === SEP ? 1 : 2 + s.charCodeAt(i));

/**
 * Walk order of two relative paths: sorted names, depth first (as lib/manifest-walk.ts lists them),
 * compared in place (no split per comparison: a sort of thousands of paths runs on the event loop).
 */
function walkOrder(a: string, b: string): number {
  let i = 0;
  while (i < a.length && i < b.length && a.charCodeAt(i) === b.charCodeAt(i)) i++;
  return rank(a, i) - rank(b, i);
}

/** Whether dir itself holds more than PREWARM_ENTRIES entries (unreadable: no). */
function manyEntries(dir: string): boolean {
  try {
    return readdirSync(dir).length > PREWARM_ENTRIES;
  } catch {
    return false;
  }
}

/**
 * Entries in walk order with `added` (in any order) merged in: the added ones are sorted, then the two
 * sorted lists merged in one pass (a burst adds a few hundred files to thousands already listed).
 */
async function mergeInWalkOrder(sorted: ListedEntry[], added: ListedEntry[], y: Yielder): Promise<ListedEntry[]> {
  const extra = [...added].sort((a, b) => walkOrder(a.rel, b.rel));
  await y.maybe();
  const out: ListedEntry[] = [];
  let i = 0;
  for (const e of extra) {
    if ((out.length & 1023) === 0) await y.maybe();
    while (i < sorted.length && walkOrder(sorted[i]!.rel, e.rel) < 0) out.push(sorted[i++]!);
    out.push(e);
  }
  while (i < sorted.length) out.push(sorted[i++]!);
  return out;
}

/** Paths looked at (lstat) at once by a patch: libuv's pool has a few threads, and each call costs this thread too. */
const LSTAT_CONCURRENCY = 16;

export class DirSource {
  private snapshot: ResourceSnapshot = emptySnapshot();
  /** A read of the directory has succeeded (until then the snapshot is empty and standalone is not ready). */
  private loadedOnce = false;
  private errors: LoadError[] = [];
  /** The refusals of the last read (formatLoadError), and the files then serving their previous version. */
  private reported = new Set<string>();
  /** The last listing, kept current by the watch between full listings. */
  private listing?: Listing;
  private unreadable?: string;
  private problemsSeen = '';
  /** Each file's last parse, with the signature it was read at. */
  private readonly parsed = new Map<
    string,
    { sig: string; load: Exclude<FileLoad, { gone: true }>; list: readonly AnyResource[] }
  >();
  /** Listing entries whose file signature matched its parse when read (the same entry is not checked again). */
  private readonly checked = new WeakSet<ListedFile>();
  /** What each file of the last read serves (its resources, or its last good ones). */
  private effective = new Map<string, readonly AnyResource[]>();
  /** The last read appended the files of a directory it could not list (out of walk order). */
  private reorderedLast = false;
  /** Resources of each file's last error-free version: a file that turns bad keeps serving these. */
  private readonly lastGood = new Map<string, readonly AnyResource[]>();
  private readonly listeners: Listener[] = [];
  private readonly parser = new ManifestParser();
  /** One watch per directory read (Linux), or one recursive watch of the directory (elsewhere). */
  private readonly watchers = new Map<string, FSWatcher>();
  private watchFailed = false;
  private started = false;
  /** The directories of the last full listing (relative; '' is the directory itself). */
  private walked = new Set<string>();
  private timer?: NodeJS.Timeout;
  private flushTimer?: NodeJS.Timeout;
  private burstStart = 0;
  private lastEvent = 0;
  private readonly pending = new Set<string>();
  private fullPending = false;
  private chain: Promise<unknown> = Promise.resolve();
  private stopped = false;

  constructor(
    readonly dir: string,
    private readonly logger: Logger,
    private readonly onErrors: (errors: LoadError[]) => void = () => {},
  ) {}

  /** The first read of the directory (a directory that cannot be read leaves loaded() false). */
  load(): Promise<ResourceSnapshot> {
    // a large directory: the parse worker loads its modules while the directory is listed
    if (!this.loadedOnce && manyEntries(this.dir)) this.parser.prewarm();
    return this.serial(() => this.rescan());
  }

  current(): ResourceSnapshot {
    return this.snapshot;
  }

  /** Whether the directory has been read at least once. */
  loaded(): boolean {
    return this.loadedOnce;
  }

  lastErrors(): LoadError[] {
    return this.errors;
  }

  /** Called with every new snapshot; a returned promise is awaited before the read counts as done. */
  onChange(listener: Listener): void {
    this.listeners.push(listener);
  }

  start(): void {
    this.started = true;
    this.syncWatchers();
    let lastFull = Date.now();
    // every POLL_MS while a watch is missing or the directory unreadable; else every RESCAN_MS
    this.timer = setInterval(() => {
      const watched = this.watchers.size > 0 && !this.watchFailed;
      if (watched && this.unreadable === undefined && this.loadedOnce && Date.now() - lastFull < RESCAN_MS) return;
      lastFull = Date.now();
      void this.serial(() => this.rescan());
    }, POLL_MS);
    this.timer.unref();
  }

  /**
   * A watch on every directory of the last listing. Not fs.watch's recursive mode on Linux: Node builds
   * it by walking the whole tree again on every new file (seconds of event loop for a burst of a few
   * thousand files); one inotify watch per directory costs nothing per file.
   */
  private syncWatchers(): void {
    if (!this.started || this.stopped) return;
    this.watchFailed = false;
    const want = process.platform === 'linux' ? this.walked : new Set(['']);
    for (const [d, w] of this.watchers) {
      if (!want.has(d)) {
        w.close();
        this.watchers.delete(d);
      }
    }
    for (const d of want) if (!this.watchers.has(d)) this.watchDir(d, process.platform !== 'linux');
  }

  private watchDir(rel: string, recursive: boolean): void {
    try {
      const w = watch(join(this.dir, rel), { recursive }, (_event, name) =>
        this.noticed(name === null ? null : rel ? join(rel, name.toString()) : name.toString()),
      );
      w.on('error', () => {
        // removed, or out of inotify watches: the next full listing watches again what it finds
        w.close();
        if (this.watchers.get(rel) === w) this.watchers.delete(rel);
        this.noticed(null);
      });
      this.watchers.set(rel, w);
    } catch {
      this.watchFailed = true; // polled every POLL_MS until every directory can be watched
    }
  }

  stop(): void {
    this.stopped = true;
    for (const w of this.watchers.values()) w.close();
    this.watchers.clear();
    if (this.timer) clearInterval(this.timer);
    if (this.flushTimer) clearTimeout(this.flushTimer);
    this.parser.stop();
  }

  /** A full listing now, re-reading the files that changed (a caller that cannot wait for the watch). */
  refresh(): Promise<ResourceSnapshot> {
    return this.serial(() => this.rescan());
  }

  /** These paths (relative to the directory) were just written or removed: applied now, nothing else re-read. */
  changed(rels: string[]): Promise<ResourceSnapshot> {
    return this.serial(() => this.patch(new Set(rels)));
  }

  private serial(step: () => Promise<unknown>): Promise<ResourceSnapshot> {
    const next = this.chain.then(step).catch((e: unknown) => {
      this.logger.error(
        { dir: this.dir, err: (e as Error).message },
        'reading the resources directory failed; the next change tries again',
      );
    });
    this.chain = next;
    return next.then(() => this.snapshot);
  }

  /**
   * A watch event: the path joins the burst (a null name, or a watch error: a full listing). An event
   * costs a set insertion and a clock read: the burst's one timer is not moved per event (a shell loop
   * writing thousands of files delivers them by the hundred in one turn of the event loop), it looks
   * when it fires whether the burst has been quiet long enough.
   */
  private noticed(name: string | null): void {
    if (this.stopped) return;
    if (name === null) this.fullPending = true;
    else this.pending.add(name);
    this.lastEvent = Date.now();
    if (this.flushTimer) return;
    this.burstStart = this.lastEvent;
    this.flushTimer = setTimeout(() => this.due(), DEBOUNCE_MS);
  }

  /** The burst's timer: applied once quiet for DEBOUNCE_MS or MAX_DELAY_MS after its first event. */
  private due(): void {
    const now = Date.now();
    const wait = Math.min(this.lastEvent + DEBOUNCE_MS, this.burstStart + MAX_DELAY_MS) - now;
    if (wait > 0) this.flushTimer = setTimeout(() => this.due(), wait);
    else this.flush();
  }

  private flush(): void {
    this.flushTimer = undefined;
    const rels = new Set(this.pending);
    const full = this.fullPending;
    this.pending.clear();
    this.fullPending = false;
    void this.serial(() => (full ? this.rescan() : this.patch(rels)));
  }

  /** The whole directory listed again (off the event loop); files whose signature changed are re-read. */
  private async rescan(): Promise<void> {
    let listing: Listing;
    try {
      listing = await listManifestsAsync(this.dir);
    } catch (e) {
      const message = (e as Error).message;
      const what = this.loadedOnce
        ? 'keeping the last good resources'
        : 'nothing loaded yet: not ready until it can be read';
      if (this.unreadable !== message)
        this.logger.error({ dir: this.dir, err: message }, `cannot read resources directory; ${what}`);
      this.unreadable = message;
      return;
    }
    this.unreadable = undefined;
    this.walked = new Set(listing.dirs ?? ['']);
    this.syncWatchers();
    await this.read(listing);
  }

  /**
   * The listing updated for these paths only, when each is a plain manifest file (or gone) in a directory
   * the listing knows; anything else is left to a full listing.
   */
  private async patch(rels: Set<string>): Promise<void> {
    if (!this.listing || this.unreadable !== undefined) return this.rescan();
    if (!(await stat(this.dir).catch(() => undefined))?.isDirectory()) return this.rescan();
    const y = new Yielder();
    const entries = this.listing.entries;
    const index = new Map<string, number>();
    for (let i = 0; i < entries.length; i++) {
      if ((i & 1023) === 0) await y.maybe();
      index.set(entries[i]!.rel, i);
    }
    const updates = new Map<string, ListedFile | undefined>();
    const candidates: string[] = [];
    for (const rel of rels) {
      const parts = rel.split(sep);
      if (parts.some((p) => p.startsWith('.') && p !== '.gw')) continue; // hidden: never read
      if (!MANIFEST_EXT.test(parts.at(-1)!)) return this.rescan(); // a directory, or a rename of one
      if (!this.walked.has(dirname(rel) === '.' ? '' : dirname(rel))) return this.rescan();
      const at = index.get(rel);
      if (at !== undefined && isProblem(entries[at]!)) return this.rescan();
      candidates.push(rel);
    }
    // the paths looked at concurrently (libuv's pool), not one round trip after another, a few at a time
    // (a burst names thousands: issued at once, their calls alone would hold the event loop)
    type Looked = { rel: string; st: BigIntStats } | { rel: string; gone: boolean };
    const stats: Looked[] = new Array<Looked>(candidates.length);
    let next = 0;
    const lookNext = async (): Promise<void> => {
      while (next < candidates.length) {
        const at = next++;
        const rel = candidates[at]!;
        stats[at] = await lstat(join(this.dir, rel), { bigint: true }).then(
          (st) => ({ rel, st }),
          (e: unknown) => ({ rel, gone: (e as NodeJS.ErrnoException).code === 'ENOENT' }),
        );
        await y.maybe();
      }
    };
    await Promise.all(Array.from({ length: Math.min(LSTAT_CONCURRENCY, candidates.length) }, lookNext));
    for (const r of stats) {
      if ('gone' in r) {
        if (!r.gone) return this.rescan();
        updates.set(r.rel, undefined);
        continue;
      }
      const st = r.st;
      if (!st.isFile()) return this.rescan(); // a symbolic link, a FIFO…: the full listing says what it is
      updates.set(r.rel, {
        rel: r.rel,
        path: join(this.dir, r.rel),
        mtimeNs: st.mtimeNs,
        size: st.size,
        ino: st.ino,
        ctimeNs: st.ctimeNs,
      });
    }
    if (!updates.size) return;
    let kept: ListedEntry[] = [];
    for (let i = 0; i < entries.length; i++) {
      if ((i & 1023) === 0) await y.maybe();
      if (!updates.has(entries[i]!.rel)) kept.push(entries[i]!);
    }
    const added = [...updates.values()].filter((f): f is ListedFile => f !== undefined);
    if (added.length) kept = await mergeInWalkOrder(kept, added, y);
    await this.read({ entries: kept });
  }

  /** Reads the files of a listing whose signature changed, then applies it if anything did. */
  private async read(listing: Listing): Promise<void> {
    // the loops below run over every file of the directory: they let requests through between slices
    const y = new Yielder();
    const stale: ListedFile[] = [];
    let n = 0;
    for (const e of listing.entries) {
      if ((++n & 255) === 0) await y.maybe();
      // an entry object kept from the last listing (a watched change elsewhere) was checked already
      if (isProblem(e) || this.checked.has(e)) continue;
      if (this.parsed.get(e.rel)?.sig !== fileSignature(e)) stale.push(e);
      else this.checked.add(e);
    }
    const loads = await this.parser.parse(
      stale.map((f) => ({ rel: f.rel, path: f.path, size: Number(f.size) })),
      !this.loadedOnce && !this.started,
    );
    const gone = new Set<string>();
    for (const f of stale) {
      if ((++n & 63) === 0) await y.maybe();
      const load = loads.get(f.rel);
      if (!load || load.gone) gone.add(f.rel);
      else {
        this.checked.add(f);
        const list = load.resources.map((x) => x.resource);
        for (const r of list) fileOf.set(r, f.rel);
        this.parsed.set(f.rel, { sig: fileSignature(f), load, list });
      }
    }
    const entries = gone.size ? listing.entries.filter((e) => !gone.has(e.rel)) : listing.entries;
    const present = new Set<string>();
    const problemList: string[] = [];
    for (const e of entries) {
      if ((++n & 1023) === 0) await y.maybe();
      present.add(e.rel);
      if (isProblem(e)) problemList.push(`${e.rel}!${e.problem}`);
    }
    let removed = false;
    for (const rel of this.parsed.keys()) {
      if ((++n & 1023) === 0) await y.maybe();
      if (!present.has(rel)) {
        this.parsed.delete(rel);
        removed = true;
      }
    }
    const problems = problemList.join('|');
    const unchanged = this.loadedOnce && !removed && stale.length === 0 && problems === this.problemsSeen;
    this.listing = { entries };
    this.problemsSeen = problems;
    if (unchanged) return;

    const errors: LoadError[] = [];
    const warnings: LoadError[] = [];
    const order: string[] = [];
    for (const e of entries) {
      if ((++n & 255) === 0) await y.maybe();
      if (isProblem(e)) {
        errors.push({ file: e.rel, message: e.problem, ...(e.dir ? { dir: true } : {}) });
        if (!e.dir) order.push(e.rel);
        continue;
      }
      const load = this.parsed.get(e.rel)!.load;
      for (const err of load.errors) errors.push(err);
      for (const w of load.warnings ?? []) warnings.push(w);
      order.push(e.rel);
    }
    const result = { errors, order };
    this.errors = errors;
    // each refusal is logged (and counted) once, not again on every later change of the directory
    const reported = new Set(result.errors.map(formatLoadError));
    const fresh = result.errors.filter((e) => !this.reported.has(formatLoadError(e)));
    for (const e of fresh) {
      if ((++n & 63) === 0) await y.maybe();
      this.logger.warn(
        { file: e.file, ...(e.index === undefined ? {} : { document: e.index }) },
        `resource refused: ${formatLoadError(e)}`,
      );
    }
    if (fresh.length) this.onErrors(fresh);
    // a document read, but perhaps not as meant (a YAML 1.1 boolean): served, said once
    for (const w of warnings) {
      const note = `warning ${formatLoadError(w)}`;
      reported.add(note);
      if (this.reported.has(note)) continue;
      this.logger.warn(
        { file: w.file, ...(w.index === undefined ? {} : { document: w.index }) },
        `resource read with a warning: ${formatLoadError(w)}`,
      );
    }
    this.snapshot = await this.merge(result, reported);
    this.reported = reported;
    this.loadedOnce = true;
    const s = this.snapshot;
    const count = s.apis.length + s.policies.length + s.keys.length + s.clients.length + s.secrets.length;
    this.logger.info({ resources: count, errors: result.errors.length }, 'resources loaded');
    for (const l of this.listeners) {
      try {
        await l(this.snapshot);
      } catch (e) {
        this.logger.error({ err: (e as Error).message }, 'applying resources failed');
      }
    }
  }

  /**
   * This read's resources, where a file with errors (or under a directory that could not be listed)
   * serves its last error-free version instead. Files keep the read order (earlier wins a conflict).
   * Only the kinds of resources of the files whose resources changed are gathered again: an edited API
   * file leaves the snapshot's list of keys the same array (which the reconciler then skips).
   */
  private async merge(
    result: { errors: LoadError[]; order: string[] },
    reported: Set<string>,
  ): Promise<ResourceSnapshot> {
    const y = new Yielder();
    const badFiles = new Set(result.errors.filter((e) => !e.dir).map((e) => e.file));
    const order = [...result.order];
    const present = new Set(order);
    const unlisted = result.errors.filter((e) => e.dir).map((e) => e.file + sep);
    if (unlisted.length) {
      for (const file of this.lastGood.keys()) {
        if (!present.has(file) && unlisted.some((d) => file.startsWith(d))) {
          order.push(file);
          badFiles.add(file);
        }
      }
    }
    // files kept from a directory that could not be listed go to the end: their order changes
    let dirty = unlisted.length || this.reorderedLast ? ALL_KINDS : 0;
    this.reorderedLast = unlisted.length > 0;
    const effective = new Map<string, readonly AnyResource[]>();
    let i = 0;
    for (const file of order) {
      if ((++i & 255) === 0) await y.maybe();
      const previous = this.lastGood.get(file);
      let resources: readonly AnyResource[] = this.parsed.get(file)?.list ?? NONE;
      if (badFiles.has(file)) {
        // a file that turns bad serves its last good version; "keeping" is said only when that version
        // has resources: a file that never loaded, or whose last good version was empty (a file being
        // filled), is said not to be loaded. One that never loaded serves its valid documents, if any.
        if (previous) resources = previous;
        const note = previous?.length ? `keep ${file}` : resources.length ? undefined : `unloaded ${file}`;
        if (note !== undefined) {
          if (!this.reported.has(note))
            this.logger.warn(
              { file },
              previous?.length
                ? 'file has errors: keeping its previous version'
                : 'file has errors: not loaded (it has no previous version to keep)',
            );
          reported.add(note);
        }
      } else this.lastGood.set(file, resources);
      effective.set(file, resources);
      const before = this.effective.get(file);
      if (before !== resources) dirty |= kindsOf(resources) | (before ? kindsOf(before) : 0);
    }
    for (const [file, before] of this.effective) if (!effective.has(file)) dirty |= kindsOf(before);
    this.effective = effective;
    for (const file of [...this.lastGood.keys()]) if (!effective.has(file)) this.lastGood.delete(file);

    const prev = this.snapshot;
    const next: ResourceSnapshot = {
      apis: dirty & KIND_BIT.ApiDefinition ? [] : prev.apis,
      policies: dirty & KIND_BIT.Policy ? [] : prev.policies,
      keys: dirty & KIND_BIT.AccessKey ? [] : prev.keys,
      clients: dirty & KIND_BIT.OAuthClient ? [] : prev.clients,
      secrets: dirty & KIND_BIT.Secret ? [] : prev.secrets,
      files: FILES,
    };
    if (!dirty) return next;
    const into: Record<AnyResource['kind'], AnyResource[]> = {
      ApiDefinition: next.apis,
      Policy: next.policies,
      AccessKey: next.keys,
      OAuthClient: next.clients,
      Secret: next.secrets,
    };
    for (const file of order) {
      if ((++i & 15) === 0) await y.maybe();
      const list = effective.get(file)!;
      if (!(kindsOf(list) & dirty)) continue;
      for (const r of list) if (KIND_BIT[r.kind] & dirty) into[r.kind].push(r);
    }
    return next;
  }
}

/**
 * Watches a manifests directory: any added, changed or removed file is picked up within a second
 * (fs.watch for speed, a 500 ms signature poll as a safety net). Bad documents and paths that cannot be
 * read (lib/manifest-walk.ts, lib/manifest-read.ts) are reported naming the file and skipped; the good
 * ones are kept. Nothing here throws into a timer: a failure is a log line and the next poll tries again.
 */
import type { FSWatcher } from 'node:fs';
import type { AnyResource } from '../crds/kinds.js';
import type { Logger } from '../lib/logger.js';
import { formatLoadError, loadListing, type LoadError, type LoadResult } from './manifests.js';
import { listingSignature, listManifests, type Listing } from '../lib/manifest-walk.js';
import { emptySnapshot, toSnapshot, type ResourceSnapshot } from '../compiler/snapshot.js';
const { watch } = process.getBuiltinModule('node:fs');
const { sep } = process.getBuiltinModule('node:path');

interface Unreadable {
  unreadable: string;
}

export class DirSource {
  private snapshot: ResourceSnapshot = emptySnapshot();
  /** A read of the directory has succeeded (until then the snapshot is empty and standalone is not ready). */
  private loadedOnce = false;
  private errors: LoadError[] = [];
  /** The refusals of the last read (formatLoadError), and the files then serving their previous version. */
  private reported = new Set<string>();
  private signature = '';
  private watcher?: FSWatcher;
  private timer?: NodeJS.Timeout;
  private debounce?: NodeJS.Timeout;
  private readonly listeners: ((s: ResourceSnapshot) => void)[] = [];
  /** Resources of each file's last error-free version: a file that turns bad keeps serving these. */
  private readonly lastGood = new Map<string, AnyResource[]>();

  constructor(
    readonly dir: string,
    private readonly logger: Logger,
    private readonly onErrors: (errors: LoadError[]) => void = () => {},
  ) {
    this.read(this.list());
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

  onChange(listener: (s: ResourceSnapshot) => void): void {
    this.listeners.push(listener);
  }

  start(pollMs = 500): void {
    try {
      this.watcher = watch(this.dir, { recursive: true }, () => this.schedule());
      this.watcher.on('error', () => undefined);
    } catch {
      // fs.watch unsupported: the poll below still catches every change
    }
    this.timer = setInterval(() => this.poll(), pollMs);
    this.timer.unref();
  }

  stop(): void {
    this.watcher?.close();
    if (this.timer) clearInterval(this.timer);
    if (this.debounce) clearTimeout(this.debounce);
  }

  /** Re-read now (used after the facade writes a manifest, so the change is visible at once). */
  reload(): ResourceSnapshot {
    this.changed(this.list());
    return this.snapshot;
  }

  /** The snapshot, re-read first when a file changed since (a caller that cannot wait for the watch). */
  refresh(): ResourceSnapshot {
    this.poll();
    return this.snapshot;
  }

  private schedule(): void {
    if (this.debounce) clearTimeout(this.debounce);
    this.debounce = setTimeout(() => this.poll(), 50);
  }

  private poll(): void {
    try {
      const listing = this.list();
      if (this.signatureOf(listing) !== this.signature) this.changed(listing);
    } catch (e) {
      this.logger.error(
        { dir: this.dir, err: (e as Error).message },
        'reading the resources directory failed; the next change tries again',
      );
    }
  }

  /** The directory listed, or the reason it cannot be. */
  private list(): Listing | Unreadable {
    try {
      return listManifests(this.dir);
    } catch (e) {
      return { unreadable: (e as Error).message };
    }
  }

  private signatureOf(listing: Listing | Unreadable): string {
    return 'unreadable' in listing ? `unreadable: ${listing.unreadable}` : listingSignature(listing);
  }

  private changed(listing: Listing | Unreadable): void {
    if (!this.read(listing)) return; // nothing new to apply
    for (const l of this.listeners) {
      try {
        l(this.snapshot);
      } catch (e) {
        this.logger.error({ err: (e as Error).message }, 'applying resources failed');
      }
    }
  }

  /** Reads the listed files into the snapshot; false when the directory could not be listed. */
  private read(listing: Listing | Unreadable): boolean {
    this.signature = this.signatureOf(listing);
    if ('unreadable' in listing) {
      const what = this.loadedOnce
        ? 'keeping the last good resources'
        : 'nothing loaded yet: not ready until it can be read';
      this.logger.error({ dir: this.dir, err: listing.unreadable }, `cannot read resources directory; ${what}`);
      return false;
    }
    const result = loadListing(listing);
    this.errors = result.errors;
    // each refusal is logged (and counted) once, not again on every later change of the directory
    const reported = new Set(result.errors.map(formatLoadError));
    const fresh = result.errors.filter((e) => !this.reported.has(formatLoadError(e)));
    for (const e of fresh)
      this.logger.warn(
        { file: e.file, ...(e.index === undefined ? {} : { document: e.index }) },
        `resource refused: ${formatLoadError(e)}`,
      );
    if (fresh.length) this.onErrors(fresh);
    this.snapshot = this.merge(result, reported);
    this.reported = reported;
    this.loadedOnce = true;
    this.logger.info({ resources: this.snapshot.files?.size ?? 0, errors: result.errors.length }, 'resources loaded');
    return true;
  }

  /**
   * This read's resources, where a file with errors (or under a directory that could not be listed)
   * serves its last error-free version instead. Files keep the read order (earlier wins a conflict).
   */
  private merge(result: LoadResult, reported: Set<string>): ResourceSnapshot {
    const byFile = new Map<string, AnyResource[]>();
    for (const r of result.resources) byFile.set(r.file, [...(byFile.get(r.file) ?? []), r.resource]);
    const badFiles = new Set(result.errors.filter((e) => !e.dir).map((e) => e.file));
    const order = [...result.files];
    const present = new Set(order);
    const unlisted = result.errors.filter((e) => e.dir).map((e) => e.file + sep);
    for (const file of this.lastGood.keys()) {
      if (!present.has(file) && unlisted.some((d) => file.startsWith(d))) {
        order.push(file);
        badFiles.add(file);
      }
    }
    const files = new Map<AnyResource, string>();
    for (const file of order) {
      const previous = this.lastGood.get(file);
      let resources = byFile.get(file) ?? [];
      if (badFiles.has(file) && previous) {
        if (!this.reported.has(`keep ${file}`))
          this.logger.warn({ file }, 'file has errors: keeping its previous version');
        reported.add(`keep ${file}`);
        resources = previous;
      } else if (!badFiles.has(file)) this.lastGood.set(file, resources);
      for (const r of resources) files.set(r, file);
    }
    const kept = new Set(order);
    for (const file of [...this.lastGood.keys()]) if (!kept.has(file)) this.lastGood.delete(file);
    return toSnapshot([...files.keys()], files);
  }
}

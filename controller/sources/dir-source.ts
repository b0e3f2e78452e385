/**
 * Watches a manifests directory: any added, changed or removed file is picked up within a second
 * (fs.watch for speed, a 500 ms signature poll as a safety net). Bad documents are reported and
 * skipped; the good ones are kept.
 */
import type { FSWatcher } from 'node:fs';
import type { AnyResource } from '../../crds/kinds.js';
import type { Logger } from '../../lib/logger.js';
import { formatLoadError, loadManifestDir, manifestFiles, type LoadError } from '../../lib/manifests.js';
import { toSnapshot, type ResourceSnapshot } from './snapshot.js';
const { statSync, watch } = process.getBuiltinModule('node:fs');
const { relative } = process.getBuiltinModule('node:path');

export class DirSource {
  private snapshot: ResourceSnapshot;
  private errors: LoadError[] = [];
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
    this.signature = this.computeSignature();
    this.snapshot = this.load();
  }

  current(): ResourceSnapshot {
    return this.snapshot;
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
    this.signature = this.computeSignature();
    this.snapshot = this.load();
    for (const l of this.listeners) l(this.snapshot);
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
    const sig = this.computeSignature();
    if (sig !== this.signature) this.reload();
  }

  private computeSignature(): string {
    try {
      return manifestFiles(this.dir)
        .map((f) => {
          const st = statSync(f, { throwIfNoEntry: false });
          return st ? `${f}:${st.mtimeMs}:${st.size}` : f;
        })
        .join('|');
    } catch {
      return 'unreadable';
    }
  }

  private load(): ResourceSnapshot {
    let result;
    try {
      result = loadManifestDir(this.dir);
    } catch (e) {
      this.logger.error({ dir: this.dir, err: (e as Error).message }, 'cannot read resources directory; keeping the last good resources');
      return this.snapshot;
    }
    this.errors = result.errors;
    for (const e of result.errors) this.logger.warn({ file: e.file, document: e.index }, `resource refused: ${formatLoadError(e)}`);
    if (result.errors.length) this.onErrors(result.errors);
    const byFile = new Map<string, AnyResource[]>();
    for (const r of result.resources) byFile.set(r.file, [...(byFile.get(r.file) ?? []), r.resource]);
    const badFiles = new Set(result.errors.map((e) => e.file));
    const present = new Set(manifestFiles(this.dir).map((f) => relative(this.dir, f)));
    const resources: AnyResource[] = [];
    for (const file of new Set([...byFile.keys(), ...badFiles])) {
      const previous = this.lastGood.get(file);
      if (badFiles.has(file) && previous) {
        this.logger.warn({ file }, 'file has errors: keeping its previous version');
        resources.push(...previous);
      } else {
        resources.push(...(byFile.get(file) ?? []));
        if (!badFiles.has(file)) this.lastGood.set(file, byFile.get(file) ?? []);
      }
    }
    for (const file of [...this.lastGood.keys()]) if (!present.has(file)) this.lastGood.delete(file);
    this.logger.info({ resources: resources.length, errors: result.errors.length }, 'resources loaded');
    return toSnapshot(resources);
  }
}

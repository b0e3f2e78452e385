/**
 * Reads, parses and validates manifest files off the event loop. A handful of small files (one edit) is
 * parsed in place, yielding between files; anything larger goes to a worker thread (standalone/
 * parse-worker.ts), started on demand and ended after a while unused, so a directory of any size — or one
 * file of 1 MiB — never holds the gateway's requests behind its parsing. Should the worker fail, the files
 * are parsed in place, still yielding between them.
 */
import { loadManifestFile, type FileLoad } from './manifests.js';
import type { ParseReply, ParseRequest, ParseResults } from './parse-worker.js';
import { Yielder } from '../lib/yielder.js';
const { Worker } = process.getBuiltinModule('node:worker_threads');

export interface FileToParse {
  rel: string;
  path: string;
  size: number;
}

/** At most this many files, and this many bytes in all, are parsed in place. */
const INLINE_FILES = 8;
const INLINE_BYTES = 32 * 1024;
/** An idle worker is ended after this long (its memory given back). */
const WORKER_IDLE_MS = 10_000;

type Worker = InstanceType<typeof Worker>;

export class ManifestParser {
  private worker?: Worker;
  private idle?: NodeJS.Timeout;
  private nextId = 1;
  private readonly waiting = new Map<
    number,
    { out: Map<string, FileLoad>; done: () => void; fail: (e: Error) => void }
  >();

  /**
   * Each file's result by its relative path. `idle`: nothing is being served yet (start-up), so the
   * files are parsed in place, without the worker's start and the copy of its results.
   */
  async parse(files: FileToParse[], idle = false): Promise<Map<string, FileLoad>> {
    if (!files.length) return new Map();
    const bytes = files.reduce((s, f) => s + f.size, 0);
    if (idle || (files.length <= INLINE_FILES && bytes <= INLINE_BYTES)) return this.inPlace(files);
    try {
      return await this.inWorker(files);
    } catch {
      this.stopWorker();
      return this.inPlace(files);
    }
  }

  stop(): void {
    this.stopWorker();
  }

  private async inPlace(files: FileToParse[]): Promise<Map<string, FileLoad>> {
    const out = new Map<string, FileLoad>();
    const y = new Yielder();
    for (const f of files) {
      out.set(f.rel, loadManifestFile(f.rel, f.path));
      await y.maybe();
    }
    return out;
  }

  private inWorker(files: FileToParse[]): Promise<Map<string, FileLoad>> {
    const w = this.startWorker();
    const id = this.nextId++;
    const out = new Map<string, FileLoad>();
    if (this.idle) clearTimeout(this.idle);
    return new Promise<Map<string, FileLoad>>((resolve, reject) => {
      this.waiting.set(id, { out, done: () => resolve(out), fail: reject });
      w.postMessage({ id, files: files.map(({ rel, path }) => ({ rel, path })) } satisfies ParseRequest);
    }).finally(() => {
      this.waiting.delete(id);
      if (!this.waiting.size && this.worker) {
        this.idle = setTimeout(() => this.stopWorker(), WORKER_IDLE_MS);
        this.idle.unref();
      }
    });
  }

  private startWorker(): Worker {
    if (this.worker) return this.worker;
    const w = new Worker(new URL('./parse-worker.js', import.meta.url));
    w.unref();
    w.on('message', (m: ParseReply) => {
      const job = this.waiting.get(m.id);
      if (!job) return;
      for (const [rel, load] of JSON.parse(m.results) as ParseResults) job.out.set(rel, load);
      if (m.done) job.done();
    });
    const failAll = (e: Error): void => {
      if (this.worker === w) this.worker = undefined;
      for (const job of this.waiting.values()) job.fail(e);
    };
    w.on('error', failAll);
    w.on('exit', (code) => failAll(new Error(`manifest parser worker exited (${code})`)));
    this.worker = w;
    return w;
  }

  private stopWorker(): void {
    if (this.idle) clearTimeout(this.idle);
    const w = this.worker;
    this.worker = undefined;
    void w?.terminate();
  }
}

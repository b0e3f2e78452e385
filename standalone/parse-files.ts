/**
 * Reads, parses and validates manifest files off the event loop. A handful of small files (one edit) is
 * parsed in place, yielding between files; anything larger goes to a worker thread (standalone/
 * parse-worker.ts), started on demand and ended after a while unused, so a directory of any size — or one
 * file of 1 MiB — never holds the gateway's requests behind its parsing. Should the worker fail, the files
 * are parsed in place, still yielding between them. At start-up (nothing served yet) a large directory is
 * parsed by both threads at once; once the gateway serves, the worker parses at background priority (it
 * takes a core only when the event loop does not need it).
 */
import { loadManifestFile, type FileLoad } from './manifests.js';
import type { ParseReply, ParseRequest, ParseResults, ParseWorkerData } from './parse-worker.js';
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
/** A start-up read of more than this many bytes is split between this thread and the worker… */
const SPLIT_BYTES = 512 * 1024;
/** …this thread taking this share of the cost; a file costs its bytes and FILE_COST (open, read, close). */
const HERE_SHARE = 0.4;
const FILE_COST = 2048;
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
   * Each file's result by its relative path. `idle`: nothing is being served yet (start-up): a large
   * directory is split between this thread and the worker, both parsing at once (start-up time is the
   * time to parse everything); a small one is parsed in place.
   */
  async parse(files: FileToParse[], idle = false): Promise<Map<string, FileLoad>> {
    if (!files.length) return new Map();
    const bytes = files.reduce((s, f) => s + f.size, 0);
    if (idle && bytes > SPLIT_BYTES && files.length > 1) return this.split(files);
    if (idle || (files.length <= INLINE_FILES && bytes <= INLINE_BYTES)) return this.inPlace(files);
    return this.offLoop(files, true);
  }

  /** In the worker (`background`: the gateway serves); in place should it fail. */
  private async offLoop(files: FileToParse[], background: boolean): Promise<Map<string, FileLoad>> {
    try {
      return await this.inWorker(files, background);
    } catch {
      this.stopWorker();
      return this.inPlace(files);
    }
  }

  /**
   * Files in place and in the worker at the same time, dealt out by cost (bytes to parse, plus a file's
   * open and read): this thread takes the smaller share, as it also starts the worker and takes in its
   * results.
   */
  private async split(files: FileToParse[]): Promise<Map<string, FileLoad>> {
    const here: FileToParse[] = [];
    const away: FileToParse[] = [];
    let hereCost = 0;
    let awayCost = 0;
    for (const f of files) {
      const cost = f.size + FILE_COST;
      if (hereCost < (hereCost + awayCost + cost) * HERE_SHARE) {
        here.push(f);
        hereCost += cost;
      } else {
        away.push(f);
        awayCost += cost;
      }
    }
    const [fromWorker, inPlace] = await Promise.all([this.offLoop(away, false), this.inPlace(here)]);
    for (const [rel, load] of fromWorker) inPlace.set(rel, load);
    return inPlace;
  }

  /**
   * The worker started ahead of a parse that will need it (it loads its modules meanwhile); ended after
   * WORKER_IDLE_MS should no parse come.
   */
  prewarm(): void {
    if (this.worker) return;
    this.startWorker(false);
    this.idleTimer();
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

  private inWorker(files: FileToParse[], background: boolean): Promise<Map<string, FileLoad>> {
    const w = this.startWorker(background);
    const id = this.nextId++;
    const out = new Map<string, FileLoad>();
    if (this.idle) clearTimeout(this.idle);
    return new Promise<Map<string, FileLoad>>((resolve, reject) => {
      this.waiting.set(id, { out, done: () => resolve(out), fail: reject });
      w.postMessage({ id, files: files.map(({ rel, path }) => ({ rel, path })), background } satisfies ParseRequest);
    }).finally(() => {
      this.waiting.delete(id);
      if (!this.waiting.size && this.worker) this.idleTimer();
    });
  }

  private idleTimer(): void {
    if (this.idle) clearTimeout(this.idle);
    this.idle = setTimeout(() => this.stopWorker(), WORKER_IDLE_MS);
    this.idle.unref();
  }

  private startWorker(background: boolean): Worker {
    if (this.worker) return this.worker;
    const w = new Worker(new URL('./parse-worker.js', import.meta.url), {
      workerData: { background } satisfies ParseWorkerData,
    });
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

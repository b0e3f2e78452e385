/**
 * The manifests parser's worker thread (standalone/parse-files.ts): reads, parses and validates the files
 * it is given, and posts their results back in chunks of a few milliseconds of work each, so the main
 * thread takes them in as small tasks between requests.
 *
 * Once the gateway serves (`background`), the thread runs at a lower scheduling priority (Linux: a
 * thread's nice value is its own): parsing a burst of files then takes the CPU only when the event loop
 * does not need it, instead of sharing the cores with it. It is lowered before the parser's modules load
 * (their loading is most of a fresh worker's cost), and never raised again.
 */
import type { FileLoad } from './manifests.js';
import { lowerThisThread } from '../lib/background-thread.js';
const { parentPort, workerData } = process.getBuiltinModule('node:worker_threads');

export interface ParseRequest {
  id: number;
  files: { rel: string; path: string }[];
  /** The gateway serves: parse at background priority from now on. */
  background?: boolean;
}

/** What the worker is started with. */
export interface ParseWorkerData {
  background?: boolean;
}

/** `results`: JSON of [rel, FileLoad][] (JSON.parse takes it in faster than a structured clone). */
export interface ParseReply {
  id: number;
  results: string;
  done: boolean;
}

export type ParseResults = [rel: string, load: FileLoad][];

/** Results are posted after this much work: each is taken in by the main thread as one small task. */
const CHUNK_MS = 8;

let background = false;
/** This thread's priority lowered (where the platform lets one thread's priority be set; else nothing). */
function toBackground(): void {
  if (background) return;
  background = true;
  lowerThisThread();
}

if ((workerData as ParseWorkerData | undefined)?.background) toBackground();
const { loadManifestFile } = await import('./manifests.js');

parentPort?.on('message', (m: ParseRequest) => {
  if (m.background) toBackground();
  let results: ParseResults = [];
  let t = performance.now();
  for (const f of m.files) {
    results.push([f.rel, loadManifestFile(f.rel, f.path)]);
    if (performance.now() - t >= CHUNK_MS) {
      parentPort!.postMessage({ id: m.id, results: JSON.stringify(results), done: false } satisfies ParseReply);
      results = [];
      t = performance.now();
    }
  }
  parentPort!.postMessage({ id: m.id, results: JSON.stringify(results), done: true } satisfies ParseReply);
});

/**
 * The manifests parser's worker thread (standalone/parse-files.ts): reads, parses and validates the files
 * it is given, and posts their results back in chunks of a few milliseconds of work each, so the main
 * thread takes them in as small tasks between requests.
 */
import { loadManifestFile, type FileLoad } from './manifests.js';
const { parentPort } = process.getBuiltinModule('node:worker_threads');

export interface ParseRequest {
  id: number;
  files: { rel: string; path: string }[];
}

/** `results`: JSON of [rel, FileLoad][] (JSON.parse takes it in faster than a structured clone). */
export interface ParseReply {
  id: number;
  results: string;
  done: boolean;
}

export type ParseResults = [rel: string, load: FileLoad][];

const CHUNK_MS = 20;

parentPort?.on('message', (m: ParseRequest) => {
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

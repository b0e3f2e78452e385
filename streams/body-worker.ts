/**
 * The body thread's entry (streams/body-thread.ts starts it): parses a large stream payload, applies the
 * edits asked for and serialises the result, so none of that runs on the gateway's event loop and the
 * parsed value lives and is collected in this thread's heap. One job at a time, in arrival order. The
 * thread runs at background priority (lib/background-thread.ts): a burst of large or hostile bodies takes
 * the CPU the request path leaves, rather than sharing the cores with it.
 */
import { decodeBody } from './body.js';
import { JsonDepthScanner } from '../lib/json-depth.js';
import type { BodyJob, BodyReply } from './body-thread.js';
import { applyMapping, editor } from './processors/mapping.js';
import { PermanentError } from './types.js';
import { lowerThisThread } from '../lib/background-thread.js';

const { parentPort } = process.getBuiltinModule('node:worker_threads');
const encoder = new TextEncoder();
lowerThisThread();

function run(job: BodyJob): BodyReply {
  if (job.kind === 'scan')
    return { id: job.id, kind: 'scanned', bytes: job.raw, pastAt: new JsonDepthScanner().feed(job.raw) };
  let body = decodeBody(job.raw);
  for (const op of job.ops) {
    if ('mapping' in op) body = applyMapping(op.mapping, body);
    else {
      if (typeof body !== 'object' || body === null || Array.isArray(body))
        throw new PermanentError('http_client processor: result_field needs a JSON object message');
      const e = editor(body as Record<string, unknown>);
      e.set(op.set.path, op.set.text === '' ? null : decodeBody(op.set.text));
      body = e.out;
    }
  }
  if (typeof body === 'string') return { id: job.id, kind: 'text', bytes: encoder.encode(body) };
  return { id: job.id, kind: 'json', bytes: encoder.encode(JSON.stringify(body ?? null)) };
}

parentPort?.on('message', (job: BodyJob) => {
  let reply: BodyReply;
  try {
    reply = run(job);
  } catch (e) {
    reply = { id: job.id, kind: 'rejected', message: (e as Error).message };
  }
  // the result's bytes move to the gateway thread (no copy)
  parentPort!.postMessage(reply, 'bytes' in reply ? [reply.bytes.buffer as ArrayBuffer] : []);
});

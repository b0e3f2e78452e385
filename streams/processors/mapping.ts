/**
 * mapping processor: simple field moves, sets and deletes on a JSON object message, in that order
 * (move, then set, then delete). Paths are dotted ("customer.id"); intermediate objects are created as
 * needed. No scripting engine. A message that is not a JSON object is rejected.
 */
import type { MappingProcessorT } from '../../crds/schemas/streaming.js';
import { PermanentError, type Message, type Processor } from '../types.js';

type Obj = Record<string, unknown>;

function isObj(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function split(path: string): string[] {
  return path.split('.').filter((p) => p !== '');
}

export function getPath(o: Obj, path: string): unknown {
  let cur: unknown = o;
  for (const k of split(path)) {
    if (!isObj(cur)) return undefined;
    cur = cur[k];
  }
  return cur;
}

export function setPath(o: Obj, path: string, value: unknown): void {
  const keys = split(path);
  const last = keys.pop();
  if (last === undefined) return;
  let cur = o;
  for (const k of keys) {
    const next = cur[k];
    if (!isObj(next)) cur[k] = {};
    cur = cur[k] as Obj;
  }
  cur[last] = value;
}

export function deletePath(o: Obj, path: string): void {
  const keys = split(path);
  const last = keys.pop();
  if (last === undefined) return;
  let cur: unknown = o;
  for (const k of keys) {
    if (!isObj(cur)) return;
    cur = cur[k];
  }
  if (isObj(cur)) delete cur[last];
}

/** Applies a mapping to a body; pure (the input is not modified). */
export function applyMapping(m: MappingProcessorT, body: unknown): Obj {
  if (!isObj(body)) throw new PermanentError('mapping: the message is not a JSON object');
  const out = structuredClone(body);
  for (const [from, to] of Object.entries(m.move ?? {})) {
    const v = getPath(out, from);
    if (v === undefined) continue;
    deletePath(out, from);
    setPath(out, to, v);
  }
  for (const [path, value] of Object.entries(m.set ?? {})) setPath(out, path, structuredClone(value));
  for (const path of m.delete ?? []) deletePath(out, path);
  return out;
}

export class MappingProcessor implements Processor {
  readonly type = 'mapping';
  constructor(private readonly m: MappingProcessorT) {}

  async process(msg: Message): Promise<Message> {
    return { ...msg, body: applyMapping(this.m, msg.body) };
  }

  async close(): Promise<void> {}
}

/**
 * A stream payload as the pipeline sees it: parsed JSON when it is JSON nested at most MAX_JSON_DEPTH
 * levels (lib/json-depth.ts), else the payload as a string (a deeper payload is kept as text rather
 * than built: the bound of every JSON body gw parses).
 */
import { parseJson } from '../lib/json-depth.js';

export function decodeBody(raw: string | Uint8Array): unknown {
  try {
    return parseJson(raw);
  } catch {
    return typeof raw === 'string' ? raw : Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength).toString('utf8');
  }
}

/**
 * Reads one manifest file without trusting it: never blocks (a FIFO put where a file was listed is
 * opened non-blocking and refused), never reads more than MAX_MANIFEST_BYTES, and says why it could not
 * read instead of throwing. A file deleted since it was listed is `gone`, which is not an error.
 */
const { closeSync, constants, fstatSync, openSync, readSync } = process.getBuiltinModule('node:fs');

/**
 * The largest manifest file read (1 MiB, the size of a ConfigMap). Directory loads run on the gateway's
 * event loop: the YAML parser takes about 0.6 s per MiB here, during which no request is answered.
 */
export const MAX_MANIFEST_BYTES = 1024 * 1024;

export type ReadOutcome =
  { ok: true; text: string } | { ok: false; gone: true } | { ok: false; gone?: false; message: string };

const CHUNK = 64 * 1024;

export function readManifestFile(path: string, maxBytes = MAX_MANIFEST_BYTES): ReadOutcome {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | (constants.O_NONBLOCK ?? 0));
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return { ok: false, gone: true };
    if (code === 'ELOOP') return { ok: false, message: 'skipped: symbolic link loop' };
    return { ok: false, message: `cannot read: ${(e as Error).message.replace(/, open '.*'$/, '')}` };
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) return { ok: false, message: 'skipped: not a regular file' };
    const tooLarge = (size: number): ReadOutcome => ({
      ok: false,
      message: `too large: ${size} bytes, over the limit of ${maxBytes} bytes per manifest file (split it into several files)`,
    });
    if (st.size > maxBytes) return tooLarge(st.size);
    const chunks: Buffer[] = [];
    let total = 0;
    // sized by fstat (one more byte to see the end), in CHUNK pieces beyond: a file that grows while read
    let next = Math.min(st.size + 1, CHUNK);
    for (;;) {
      const buf = Buffer.allocUnsafe(next);
      next = CHUNK;
      const n = readSync(fd, buf, 0, buf.length, null);
      if (n === 0) break;
      chunks.push(buf.subarray(0, n));
      total += n;
      if (total > maxBytes) return tooLarge(total); // grew while being read
    }
    return { ok: true, text: Buffer.concat(chunks, total).toString('utf8') };
  } catch (e) {
    return { ok: false, message: `cannot read: ${(e as Error).message}` };
  } finally {
    closeSync(fd);
  }
}

/** The first line of every manifest the facade writes. */
export const WRITTEN_BY_FACADE = '# written by the gw facade\n';

/**
 * A manifest the facade wrote as compact JSON (JSON is YAML): parsed by JSON.parse, tens of times faster
 * than a YAML parser on a large one. Undefined for any other text (a YAML parser reads it).
 */
export function facadeJson(text: string): unknown {
  if (!text.startsWith(WRITTEN_BY_FACADE) || text.charCodeAt(WRITTEN_BY_FACADE.length) !== 123 /* { */)
    return undefined;
  try {
    return JSON.parse(text.slice(WRITTEN_BY_FACADE.length)) as unknown;
  } catch {
    return undefined;
  }
}

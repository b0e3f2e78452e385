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

/**
 * The buffer files are read into, reused (grown to the largest file read): one allocation for a
 * directory of 10,000 files instead of one per file, and a file that fstat sized is read by one read.
 */
let scratch = Buffer.allocUnsafe(CHUNK);

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
    // one byte more than fstat's size: a read that returns exactly the size is the whole file
    const want = st.size + 1;
    if (scratch.length < want) scratch = Buffer.allocUnsafe(want);
    const first = readSync(fd, scratch, 0, want, null);
    if (first === st.size) return decodeManifest(scratch.subarray(0, first));
    // shorter (truncated meanwhile) or longer (growing): read on to the end, in CHUNK pieces
    const chunks: Buffer[] = [Buffer.from(scratch.subarray(0, first))];
    let total = first;
    if (total > maxBytes) return tooLarge(total);
    while (first > 0) {
      const buf = Buffer.allocUnsafe(CHUNK);
      const n = readSync(fd, buf, 0, buf.length, null);
      if (n === 0) break;
      chunks.push(buf.subarray(0, n));
      total += n;
      if (total > maxBytes) return tooLarge(total); // grew while being read
    }
    return decodeManifest(Buffer.concat(chunks, total));
  } catch (e) {
    return { ok: false, message: `cannot read: ${(e as Error).message}` };
  } finally {
    closeSync(fd);
  }
}

/**
 * A manifest read from a stream (stdin: a pipe, a terminal, a redirected file) with the bound a file has:
 * read in CHUNK pieces and stopped at maxBytes + 1 bytes, so a stream of any length costs at most the
 * bound in memory (docs/standalone.md: stdin is read as the directory is read). A non-blocking stream
 * (EAGAIN) is waited for, a millisecond at a time.
 */
export function readManifestStream(fd: number, maxBytes = MAX_MANIFEST_BYTES): ReadOutcome {
  const buf = Buffer.allocUnsafe(maxBytes + 1);
  let total = 0;
  try {
    while (total <= maxBytes) {
      let n: number;
      try {
        n = readSync(fd, buf, total, Math.min(CHUNK, buf.length - total), null);
      } catch (e) {
        const code = (e as NodeJS.ErrnoException).code;
        if (code === 'EAGAIN') {
          Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1);
          continue;
        }
        if (code === 'EOF') break; // a closed console on Windows
        throw e;
      }
      if (n === 0) break;
      total += n;
    }
  } catch (e) {
    return { ok: false, message: `cannot read: ${(e as Error).message}` };
  }
  if (total > maxBytes)
    return {
      ok: false,
      message: `too large: more than ${maxBytes} bytes, over the limit of ${maxBytes} bytes per manifest file (split it into several files)`,
    };
  return decodeManifest(buf.subarray(0, total));
}

/**
 * A manifest's bytes as text: UTF-8, a UTF-8 byte-order mark dropped (YAML allows one; JSON.parse would
 * refuse it). A UTF-16 or UTF-32 file (what PowerShell 5's `>` and some Windows editors write: a
 * byte-order mark, or NUL bytes, which neither YAML nor JSON text may hold) is refused naming the
 * encoding, rather than decoded as UTF-8 into a parse error about its first character
 * (docs/standalone.md, "Checking manifests before they are applied").
 */
export function decodeManifest(bytes: Uint8Array): ReadOutcome {
  const b0 = bytes[0];
  const b1 = bytes[1];
  let encoding: string | undefined;
  if (b0 === 0xff && b1 === 0xfe) encoding = bytes[2] === 0 && bytes[3] === 0 ? 'UTF-32LE' : 'UTF-16LE';
  else if (b0 === 0xfe && b1 === 0xff) encoding = 'UTF-16BE';
  else if (b0 === 0 && b1 === 0 && bytes[2] === 0xfe && bytes[3] === 0xff) encoding = 'UTF-32BE';
  if (encoding)
    return {
      ok: false,
      message: `not UTF-8: encoded as ${encoding} (a byte-order mark); gw reads manifests as UTF-8 (save it as UTF-8)`,
    };
  if (bytes.indexOf(0) >= 0)
    return {
      ok: false,
      message:
        'not UTF-8 text: it has NUL bytes (UTF-16 without a byte-order mark?); gw reads manifests as UTF-8 (save it as UTF-8)',
    };
  const skip = b0 === 0xef && b1 === 0xbb && bytes[2] === 0xbf ? 3 : 0;
  const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  return { ok: true, text: buf.toString('utf8', skip) };
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

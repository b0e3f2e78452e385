/**
 * The gateway's HTTP/2 response heads use no HPACK dynamic table (lib/tuning.ts
 * H2_RESPONSE_HEADER_TABLE_BYTES, docs/proxy.md "TLS and HTTP/2"): every field of every answer is a static
 * table reference or a literal the client does not index, on the real `gw standalone` over h2c. A node:http2
 * server with its defaults, answering the same, indexes them: the check can tell the two apart.
 */
import { createServer, type Server } from 'node:http';
import { createServer as createH2Server, type Http2Server } from 'node:http2';
import { sha256hex } from '../../../lib/hash.js';
import { hpackFields, RawConnection, type HpackField } from '../../helpers/h2.js';
import { apiManifest, cleanup, startStandalone, tempDir, type Standalone } from '../../helpers/standalone.js';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

const KEY = 'h2-heads-key-0001';
let n = 0;
/** The upstream's answer: a header whose value changes on every response, as X-RateLimit-Remaining does. */
const answer = (res: { setHeader(k: string, v: string): void; end(b: string): void }): void => {
  res.setHeader('x-n', String(++n));
  res.setHeader('content-type', 'application/json');
  res.end('{"ok":true}');
};

/**
 * Fields that write to or read from the decoder's dynamic table (static table: indexes 1–61); a table size
 * update to 0 (the encoder saying it keeps none, at the start of a block) is not one.
 */
const dynamic = (fields: HpackField[]): HpackField[] =>
  fields.filter(
    (f) =>
      f.kind === 'incremental' || (f.kind === 'table-size' && f.index > 0) || (f.kind === 'indexed' && f.index > 61),
  );
/** The header fields of a block, without its table size updates. */
const headerFields = (fields: HpackField[]): HpackField[] => fields.filter((f) => f.kind !== 'table-size');

/** Three GETs of `path` one after the other on one raw h2c connection to `port`: their response header blocks. */
async function threeHeads(port: number, path: string, extra: [string, string][] = []): Promise<Buffer[]> {
  const c = new RawConnection(port);
  try {
    await c.open();
    const heads: Buffer[] = [];
    for (let i = 0; i < 3; i++) {
      const id = c.request(path, extra);
      const until = performance.now() + 5000;
      while (!c.ended.has(id) && !c.closed && performance.now() < until) await new Promise((r) => setTimeout(r, 5));
      const head = c.heads.get(id);
      if (head === undefined) throw new Error(`no response head for stream ${id}`);
      heads.push(head);
    }
    return heads;
  } finally {
    c.socket.destroy();
  }
}

describe('HTTP/2 response heads without the HPACK dynamic table', () => {
  let upstream: Server;
  let control: Http2Server;
  let gw: Standalone;
  let dir: string;

  beforeAll(async () => {
    upstream = createServer((_req, res) => answer(res));
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
    control = createH2Server((_req, res) => answer(res));
    await new Promise<void>((r) => control.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(upstream.address() as { port: number }).port}`;
    dir = tempDir();
    writeFileSync(
      join(dir, 'api.yaml'),
      `${apiManifest('k', `proxy: {listen_path: /k/, target_url: '${url}'}`)}---
apiVersion: gw.io/v1alpha1
kind: AccessKey
metadata: {name: k}
spec: {key_hash: ${sha256hex(KEY)}, rate: 1000, per: 1}
`,
    );
    gw = await startStandalone(dir);
  });
  afterAll(async () => {
    await gw?.stop();
    upstream?.close();
    control?.close();
    cleanup(dir);
  });

  test('the gateway: a keyed answer (X-RateLimit-* and a changing upstream header) and its own 401, no field indexed', async () => {
    const port = Number(new URL(gw.gateway).port);
    const keyed = await threeHeads(port, '/k/a', [['authorization', KEY]]);
    for (const head of keyed) {
      const fields = hpackFields(head);
      expect(headerFields(fields)[0]).toEqual({ kind: 'indexed', index: 8 }); // :status 200
      // :status, three X-RateLimit-*, x-n, content-type, content-length, date
      expect(headerFields(fields).length).toBeGreaterThanOrEqual(8);
      expect(dynamic(fields)).toEqual([]);
    }
    // nothing left to refer back to: the third head is about as long as the first (Huffman codes of the
    // changing digits differ by a bit or so), where a dynamic table makes it a fifth of it
    expect(keyed[2]!.length).toBeGreaterThan(keyed[0]!.length * 0.8);
    for (const head of await threeHeads(port, '/k/a')) {
      const fields = hpackFields(head);
      // :status 401: a literal value under a static :status name (entries 8–14)
      const status = headerFields(fields)[0]!;
      expect(status.kind).toBe('without');
      expect(status.index >= 8 && status.index <= 14).toBe(true);
      expect(dynamic(fields)).toEqual([]);
    }
  });

  test("node:http2's defaults index the same answer (the check above can fail)", async () => {
    const [first, second] = await threeHeads((control.address() as { port: number }).port, '/x');
    expect(hpackFields(first!).some((f) => f.kind === 'incremental')).toBe(true);
    expect(hpackFields(second!).some((f) => f.kind === 'indexed' && f.index > 61)).toBe(true);
    expect(second!.length).toBeLessThan(first!.length);
  });
});

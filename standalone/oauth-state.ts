/**
 * Standalone's OAuth tokens (docs/contract.md#oauth-tokens: memory, persisted under DIR/.gw/ so a restart loses no token),
 * in two files, both mode 0600 and hidden (the directory loader skips them):
 *   `DIR/.gw/.oauth-tokens.json`  the state as it was at the last compaction, naming its journal;
 *   `DIR/.gw/.oauth-tokens-<id>.log`  the journal: every change since, one JSON line each (a token put or
 *     removed, a code, a use mark), appended before the change is answered: a token handed out is on disk.
 * An issuance appends its own lines only, so its cost does not grow with the tokens held (docs/oauth.md,
 * "Storage"). Changes that arrive while an append runs go into the next one. Once the journal holds more
 * lines than twice the entries held (and at least COMPACT_MIN_LINES), the state is written afresh under a
 * new journal (a temporary file renamed over the state, which then names the new journal; the old one is
 * deleted): a compaction writes at most half a record per line appended since the last one. Only SHA-256
 * hashes of tokens and codes, with their client and expiry; expired entries are dropped from memory every
 * minute and left out of the next compaction. Read once at start, validated: a state file that does not
 * validate is ignored with one line; a journal is replayed up to its first line that does not validate
 * (the last line of a write cut short by a crash). A restored state is compacted at once.
 */
import type { Logger } from '../lib/logger.js';
import { formatZodError } from '../lib/errors.js';
import { MemoryTokenStore } from '../stores/oauth/tokens-memory.js';
import { TokenChangeSchema, TokenStateSchema, type TokenChange } from '../contract/oauth/tokens.js';
import type { FileHandle } from 'node:fs/promises';
const { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, unlinkSync, writeFileSync } =
  process.getBuiltinModule('node:fs');
const { open, rename, unlink, writeFile } = process.getBuiltinModule('node:fs/promises');
const { join } = process.getBuiltinModule('node:path');
const { randomBytes } = process.getBuiltinModule('node:crypto');

export const OAUTH_STATE_FILE = '.oauth-tokens.json';
const JOURNAL = /^\.oauth-tokens-[0-9a-z-]+\.log$/;
/** A journal shorter than this is never compacted (a few tokens do not rewrite the state on every issuance). */
export const COMPACT_MIN_LINES = 1000;

interface Batch {
  text: string[];
  lines: number;
  done: Promise<void>;
  resolve(): void;
}

export class OAuthTokenPersistence {
  readonly store: MemoryTokenStore;
  private readonly file: string;
  private journalName?: string;
  private journal?: FileHandle;
  private journalLines = 0;
  private batch?: Batch;
  private writing?: Promise<void>;
  private failing = false;
  private sweeper?: NodeJS.Timeout;
  /** Bytes written to the state file and the journal since start (tests: an issuance's cost). */
  bytesWritten = 0;
  /** Compactions since start (tests). */
  compactions = 0;

  constructor(
    private readonly gwDir: string,
    private readonly logger: Logger,
    nowSeconds: () => number = () => Date.now() / 1000,
  ) {
    this.file = join(gwDir, OAUTH_STATE_FILE);
    this.store = new MemoryTokenStore(nowSeconds, (changes) => this.save(changes));
  }

  /** Reads the state and replays its journal (synchronously: nothing is served yet), then compacts. */
  load(): void {
    const restored = this.read();
    if (restored) {
      this.logger.info({ file: this.file, tokens: restored.tokens }, 'OAuth tokens restored');
      this.compactNow();
    }
  }

  start(): void {
    this.sweeper = setInterval(() => this.store.sweep(), 60_000);
    this.sweeper.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.sweeper);
    while (this.writing) await this.writing;
    await this.journal?.close().catch(() => undefined);
    this.journal = undefined;
  }

  /** Resolves once `changes` are on disk (or the write failed and was logged). */
  save(changes: readonly TokenChange[]): Promise<void> {
    if (changes.length === 0) return Promise.resolve();
    let b = this.batch;
    if (!b) {
      let resolve!: () => void;
      const done = new Promise<void>((r) => (resolve = r));
      b = this.batch = { text: [], lines: 0, done, resolve };
    }
    for (const c of changes) b.text.push(JSON.stringify(c) + '\n');
    b.lines += changes.length;
    if (!this.writing)
      this.writing = this.drain().finally(() => {
        this.writing = undefined;
      });
    return b.done;
  }

  private async drain(): Promise<void> {
    while (this.batch) {
      const b = this.batch;
      this.batch = undefined;
      await this.append(b.text.join(''), b.lines);
      b.resolve();
      if (this.journalLines > Math.max(COMPACT_MIN_LINES, 2 * this.store.size())) await this.compact();
    }
  }

  private async append(text: string, lines: number): Promise<void> {
    try {
      if (!this.journal) {
        if (this.journalName === undefined) await this.compact();
        this.journal ??= await open(join(this.gwDir, this.journalName!), 'a', 0o600);
      }
      const buf = Buffer.from(text, 'utf8');
      await this.journal.write(buf);
      this.bytesWritten += buf.length;
      this.journalLines += lines;
      this.failing = false;
    } catch (e) {
      this.failed(e);
    }
  }

  /** The state as it is now under a new, empty journal; the old journal deleted. */
  private async compact(): Promise<void> {
    const name = newJournalName();
    const text = JSON.stringify({ ...this.store.snapshot(), journal: name });
    try {
      mkdirSync(this.gwDir, { recursive: true });
      const fresh = await open(join(this.gwDir, name), 'a', 0o600);
      const tmp = join(this.gwDir, `.oauth-tokens-${process.pid}.tmp`);
      await writeFile(tmp, text, { mode: 0o600 });
      await rename(tmp, this.file);
      this.bytesWritten += Buffer.byteLength(text);
      this.compactions++;
      const old = this.journalName;
      await this.journal?.close().catch(() => undefined);
      this.journal = fresh;
      this.journalName = name;
      this.journalLines = 0;
      if (old !== undefined) await unlink(join(this.gwDir, old)).catch(() => undefined);
    } catch (e) {
      this.failed(e);
    }
  }

  /** The same at start-up, synchronously. */
  private compactNow(): void {
    const name = newJournalName();
    try {
      mkdirSync(this.gwDir, { recursive: true });
      writeFileSync(join(this.gwDir, name), '', { mode: 0o600 });
      const tmp = join(this.gwDir, `.oauth-tokens-${process.pid}.tmp`);
      writeFileSync(tmp, JSON.stringify({ ...this.store.snapshot(), journal: name }), { mode: 0o600 });
      renameSync(tmp, this.file);
      this.journalName = name;
      this.journalLines = 0;
      this.compactions++;
      // the journals replayed, and any a crash left between a compaction's rename and its delete
      for (const f of readdirSync(this.gwDir)) if (JOURNAL.test(f) && f !== name) unlinkSync(join(this.gwDir, f));
    } catch (e) {
      this.failed(e);
    }
  }

  private read(): { tokens: number } | undefined {
    if (!existsSync(this.file)) return undefined;
    let doc: unknown;
    try {
      doc = JSON.parse(readFileSync(this.file, 'utf8'));
    } catch (e) {
      this.logger.warn({ file: this.file, err: (e as Error).message }, 'OAuth tokens ignored: not JSON');
      return undefined;
    }
    const r = TokenStateSchema.safeParse(doc);
    if (!r.success) {
      this.logger.warn({ file: this.file }, `OAuth tokens ignored: ${formatZodError(r.error)}`);
      return undefined;
    }
    this.store.restore(r.data);
    const name = r.data.journal;
    if (name !== undefined && JOURNAL.test(name) && existsSync(join(this.gwDir, name))) {
      const lines = readFileSync(join(this.gwDir, name), 'utf8').split('\n');
      for (let i = 0; i < lines.length; i++) {
        const line = lines[i]!;
        if (line === '') continue;
        const c = parseChange(line);
        if (c === undefined) {
          // a crash cuts only the last line short; anything else is a damaged journal
          if (lines.slice(i + 1).some((l) => l !== ''))
            this.logger.warn(
              { file: join(this.gwDir, name), line: i + 1 },
              'OAuth token journal damaged: replayed up to this line',
            );
          break;
        }
        this.store.apply(c);
      }
      this.store.sweep();
    }
    return { tokens: this.store.size() };
  }

  private failed(e: unknown): void {
    if (!this.failing)
      this.logger.warn(
        { file: this.file, err: (e as Error).message },
        'OAuth tokens not saved (a restart would lose the tokens issued since); trying again at the next change',
      );
    this.failing = true;
  }
}

function newJournalName(): string {
  return `.oauth-tokens-${Date.now().toString(36)}-${randomBytes(4).toString('hex')}.log`;
}

function parseChange(line: string): TokenChange | undefined {
  try {
    const r = TokenChangeSchema.safeParse(JSON.parse(line));
    return r.success ? r.data : undefined;
  } catch {
    return undefined;
  }
}

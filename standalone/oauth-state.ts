/**
 * Standalone's OAuth tokens (docs/contract.md#oauth-tokens: memory, persisted under DIR/.gw/ so a restart loses no token):
 * `DIR/.gw/.oauth-tokens.json` (hidden: the directory loader skips it), mode 0600, written atomically (a
 * temporary file renamed over it) after every change and before the change is answered: a token handed
 * out is on disk. Changes that arrive while a write runs are coalesced into the next one. It holds only
 * SHA-256 hashes of tokens and codes, with their client and expiry; expired entries are swept every
 * minute. Read once at start, validated: a file that does not validate is ignored with one line.
 */
import type { Logger } from '../lib/logger.js';
import { formatZodError } from '../lib/errors.js';
import { MemoryTokenStore, TokenStateSchema } from '../contract/oauth/tokens.js';
const { existsSync, mkdirSync, readFileSync } = process.getBuiltinModule('node:fs');
const { rename, writeFile } = process.getBuiltinModule('node:fs/promises');
const { join } = process.getBuiltinModule('node:path');

export const OAUTH_STATE_FILE = '.oauth-tokens.json';

export class OAuthTokenPersistence {
  readonly store: MemoryTokenStore;
  private readonly file: string;
  private writing?: Promise<void>;
  private again = false;
  private failing = false;
  private sweeper?: NodeJS.Timeout;

  constructor(
    private readonly gwDir: string,
    private readonly logger: Logger,
    nowSeconds: () => number = () => Date.now() / 1000,
  ) {
    this.file = join(gwDir, OAUTH_STATE_FILE);
    this.store = new MemoryTokenStore(nowSeconds, () => this.save());
  }

  load(): void {
    if (!existsSync(this.file)) return;
    let doc: unknown;
    try {
      doc = JSON.parse(readFileSync(this.file, 'utf8'));
    } catch (e) {
      this.logger.warn({ file: this.file, err: (e as Error).message }, 'OAuth tokens ignored: not JSON');
      return;
    }
    const r = TokenStateSchema.safeParse(doc);
    if (!r.success) {
      this.logger.warn({ file: this.file }, `OAuth tokens ignored: ${formatZodError(r.error)}`);
      return;
    }
    this.store.restore(r.data);
    this.logger.info({ file: this.file, tokens: Object.keys(r.data.tokens).length }, 'OAuth tokens restored');
  }

  start(): void {
    this.sweeper = setInterval(() => {
      if (this.store.sweep()) void this.save();
    }, 60_000);
    this.sweeper.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.sweeper);
    await this.writing;
  }

  /** Resolves once the state as it is now is on disk (or the write failed and was logged). */
  save(): Promise<void> {
    if (this.writing) {
      this.again = true;
      // the write under way may have read the state before this change: wait for the one after it
      return this.writing.then(() => this.writing);
    }
    this.writing = this.write().finally(() => {
      this.writing = undefined;
      if (this.again) {
        this.again = false;
        void this.save();
      }
    });
    return this.writing;
  }

  private async write(): Promise<void> {
    const text = JSON.stringify(this.store.snapshot());
    try {
      mkdirSync(this.gwDir, { recursive: true });
      const tmp = join(this.gwDir, `.oauth-tokens-${process.pid}.tmp`);
      await writeFile(tmp, text, { mode: 0o600 });
      await rename(tmp, this.file);
      this.failing = false;
    } catch (e) {
      if (!this.failing)
        this.logger.warn(
          { file: this.file, err: (e as Error).message },
          'OAuth tokens not saved (a restart would lose the tokens issued since); trying again at the next change',
        );
      this.failing = true;
    }
  }
}

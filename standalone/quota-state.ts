/**
 * Standalone without `--redis` counts quotas in memory; this carries the running periods across a
 * restart (docs/contract.md#commands-and-flags: "a restart loses nothing"). The file `DIR/.gw/.quota-state.json` (hidden: the
 * directory loader skips it) holds, per quota bucket (a key hash or a rate-limit-pattern identity,
 * never a raw key), the requests used and the renewal time. It is written when the counters changed,
 * at most every `everyMs`, and once more at shutdown, atomically (a temporary file renamed over it),
 * mode 0600; read once at start, validated: a file that does not validate is ignored with one line.
 * A crash loses at most the last `everyMs` of counting.
 */
import { z } from 'zod';
import type { Logger } from '../lib/logger.js';
import { formatZodError } from '../lib/errors.js';
import type { MemoryQuota, QuotaPeriod } from '../limiters/quota.js';
const { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } = process.getBuiltinModule('node:fs');
const { join } = process.getBuiltinModule('node:path');

export const QUOTA_STATE_FILE = '.quota-state.json';

const QuotaStateFile = z.strictObject({
  version: z.literal(1),
  periods: z.array(
    z.strictObject({ bucket: z.string().min(1).max(2048), used: z.number().int().min(0), renews: z.number().min(0) }),
  ),
});

export class QuotaStatePersistence {
  private timer?: NodeJS.Timeout;
  private lastWritten = '';
  private failing = false;
  private readonly file: string;

  constructor(
    private readonly gwDir: string,
    private readonly quota: MemoryQuota,
    private readonly logger: Logger,
    private readonly everyMs = 2000,
  ) {
    this.file = join(gwDir, QUOTA_STATE_FILE);
    this.lastWritten = this.text([]); // nothing counted yet: no file to write
  }

  /** The periods of the last run, when the file is there and valid. */
  load(): void {
    if (!existsSync(this.file)) return;
    let doc: unknown;
    try {
      doc = JSON.parse(readFileSync(this.file, 'utf8'));
    } catch (e) {
      this.logger.warn(
        { file: this.file, err: (e as Error).message },
        'quota state ignored: not JSON (quotas start afresh)',
      );
      return;
    }
    const r = QuotaStateFile.safeParse(doc);
    if (!r.success) {
      this.logger.warn({ file: this.file }, `quota state ignored: ${formatZodError(r.error)} (quotas start afresh)`);
      return;
    }
    this.quota.restore(r.data.periods);
    this.lastWritten = this.text(this.quota.snapshot());
    this.logger.info({ file: this.file, periods: r.data.periods.length }, 'quota state restored');
  }

  start(): void {
    this.timer = setInterval(() => this.save(), this.everyMs);
    this.timer.unref();
  }

  /** The last write (shutdown). */
  stop(): void {
    clearInterval(this.timer);
    this.save();
  }

  private text(periods: QuotaPeriod[]): string {
    return JSON.stringify({ version: 1, periods: [...periods].sort((a, b) => a.bucket.localeCompare(b.bucket)) });
  }

  private save(): void {
    const text = this.text(this.quota.snapshot());
    if (text === this.lastWritten) return;
    try {
      mkdirSync(this.gwDir, { recursive: true });
      const tmp = join(this.gwDir, `.quota-state-${process.pid}.tmp`);
      writeFileSync(tmp, text, { mode: 0o600 });
      renameSync(tmp, this.file);
      this.lastWritten = text;
      this.failing = false;
    } catch (e) {
      // once per failure spell (a read-only DIR would otherwise log every period)
      if (!this.failing)
        this.logger.warn(
          { file: this.file, err: (e as Error).message },
          'quota state not saved (a restart would start quotas afresh); trying again',
        );
      this.failing = true;
    }
  }
}

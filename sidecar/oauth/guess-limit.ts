/**
 * Failed client authentications at the token and revoke endpoints (docs/contract.md#oauth-endpoints), limited per client id and
 * per source address: over `max` failures within `windowMs`, every attempt of that client or address is
 * refused (429, Retry-After) until the window that counted them ends, a right secret included (else
 * guessing would go on). Counted in this process: in a cluster each gateway counts its own (a guesser
 * spread over N gateways gets N times the attempts; at 256-bit secrets that buys nothing). Bounded: the
 * tables are cleared when they reach `maxEntries`.
 */
export interface GuessLimits {
  perClient: number;
  perAddress: number;
  windowMs: number;
}

export const DEFAULT_GUESS_LIMITS: GuessLimits = { perClient: 10, perAddress: 50, windowMs: 60_000 };

interface Window {
  start: number;
  failures: number;
}

class FailureTable {
  private readonly m = new Map<string, Window>();
  constructor(
    private readonly max: number,
    private readonly windowMs: number,
    private readonly maxEntries: number,
  ) {}

  /** ms until `key` may try again, or 0. */
  blockedFor(key: string, now: number): number {
    const w = this.m.get(key);
    if (w === undefined) return 0;
    if (now - w.start >= this.windowMs) {
      this.m.delete(key);
      return 0;
    }
    return w.failures >= this.max ? w.start + this.windowMs - now : 0;
  }

  fail(key: string, now: number): void {
    const w = this.m.get(key);
    if (w === undefined || now - w.start >= this.windowMs) {
      if (this.m.size >= this.maxEntries) this.m.clear();
      this.m.set(key, { start: now, failures: 1 });
    } else w.failures++;
  }
}

export class GuessLimiter {
  private readonly clients: FailureTable;
  private readonly addresses: FailureTable;

  constructor(
    limits: GuessLimits = DEFAULT_GUESS_LIMITS,
    private readonly now: () => number = Date.now,
    maxEntries = 100_000,
  ) {
    this.clients = new FailureTable(limits.perClient, limits.windowMs, maxEntries);
    this.addresses = new FailureTable(limits.perAddress, limits.windowMs, maxEntries);
  }

  /** Seconds to wait (Retry-After) when this client or address is refused now, else 0. */
  retryAfter(clientKey: string | undefined, address: string): number {
    const now = this.now();
    const ms = Math.max(
      this.addresses.blockedFor(address, now),
      clientKey ? this.clients.blockedFor(clientKey, now) : 0,
    );
    return ms > 0 ? Math.max(1, Math.ceil(ms / 1000)) : 0;
  }

  failed(clientKey: string | undefined, address: string): void {
    const now = this.now();
    this.addresses.fail(address, now);
    if (clientKey) this.clients.fail(clientKey, now);
  }
}

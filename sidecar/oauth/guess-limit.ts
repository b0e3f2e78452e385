/**
 * Failed client authentications at the token and revoke endpoints (docs/oauth.md, "Guessing"), counted
 * within `windowMs` in three tables:
 *   - per (client, source address): over `perClientAddress` failures that pair is refused (429,
 *     Retry-After) until the window that counted them ends, a right secret included (else guessing
 *     would go on). A guesser locks out only itself: the real client, from another address, is served.
 *   - per source address, every client together: over `perAddress` that address is refused.
 *   - per client, every address together: over `perClient` (a ceiling no single address can reach, since
 *     each pair stops at `perClientAddress`) a source that has failed for that client in its window is
 *     refused from its next attempt on, while a source that has not failed is served. A guesser with many
 *     addresses gets one guess per new address past the ceiling; the real client keeps working.
 * The source address is the caller's (`ClientAddresses.of`: the socket's peer, or the client a trusted
 * proxy names; IPv6 by its /64). Counted in this process: in a cluster each gateway counts its own (a
 * guesser spread over N gateways gets N times the attempts; at 256-bit secrets that buys nothing).
 * Bounded: a table is cleared when it reaches `maxEntries`.
 */
export interface GuessLimits {
  perClientAddress: number;
  perAddress: number;
  perClient: number;
  windowMs: number;
}

export const DEFAULT_GUESS_LIMITS: GuessLimits = {
  perClientAddress: 10,
  perAddress: 50,
  perClient: 1000,
  windowMs: 60_000,
};

interface Window {
  start: number;
  failures: number;
}

class FailureTable {
  private readonly m = new Map<string, Window>();
  constructor(
    private readonly windowMs: number,
    private readonly maxEntries: number,
  ) {}

  /** The failures of `key` in its current window, and the ms until that window ends. */
  window(key: string, now: number): { failures: number; endsIn: number } {
    const w = this.m.get(key);
    if (w === undefined) return { failures: 0, endsIn: 0 };
    if (now - w.start >= this.windowMs) {
      this.m.delete(key);
      return { failures: 0, endsIn: 0 };
    }
    return { failures: w.failures, endsIn: w.start + this.windowMs - now };
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
  private readonly pairs: FailureTable;
  private readonly clients: FailureTable;
  private readonly addresses: FailureTable;

  constructor(
    private readonly limits: GuessLimits = DEFAULT_GUESS_LIMITS,
    private readonly now: () => number = Date.now,
    maxEntries = 100_000,
  ) {
    this.pairs = new FailureTable(limits.windowMs, maxEntries);
    this.clients = new FailureTable(limits.windowMs, maxEntries);
    this.addresses = new FailureTable(limits.windowMs, maxEntries);
  }

  /** Seconds to wait (Retry-After) when this client from this address is refused now, else 0. */
  retryAfter(clientKey: string | undefined, address: string): number {
    const now = this.now();
    let ms = 0;
    const a = this.addresses.window(address, now);
    if (a.failures >= this.limits.perAddress) ms = a.endsIn;
    if (clientKey !== undefined) {
      const p = this.pairs.window(`${clientKey}\u0000${address}`, now);
      const ceiling = this.clients.window(clientKey, now).failures >= this.limits.perClient;
      if (p.failures >= (ceiling ? 1 : this.limits.perClientAddress)) ms = Math.max(ms, p.endsIn);
    }
    return ms > 0 ? Math.max(1, Math.ceil(ms / 1000)) : 0;
  }

  failed(clientKey: string | undefined, address: string): void {
    const now = this.now();
    this.addresses.fail(address, now);
    if (clientKey !== undefined) {
      this.pairs.fail(`${clientKey}\u0000${address}`, now);
      this.clients.fail(clientKey, now);
    }
  }
}

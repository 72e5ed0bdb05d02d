// The default blacklist backend: a Map in this process, lost on restart (documented in docs/auth.md).
// Its size is bounded by the number of logouts within one token lifetime, since expired entries are
// swept by the cleanup timer.
import type { TokenBlacklist } from './blacklist.js';

export class MemoryBlacklist implements TokenBlacklist {
  private readonly entries = new Map<string, number>();
  private closed = false;

  async add(jti: string, expiresAtMs: number): Promise<void> {
    this.assertOpen();
    this.entries.set(jti, Math.max(expiresAtMs, this.entries.get(jti) ?? -Infinity));
  }

  async has(jti: string): Promise<boolean> {
    this.assertOpen();
    return this.entries.has(jti);
  }

  async removeExpired(nowMs: number): Promise<number> {
    this.assertOpen();
    let removed = 0;
    for (const [jti, expiresAtMs] of this.entries) {
      if (expiresAtMs <= nowMs) {
        this.entries.delete(jti);
        removed += 1;
      }
    }
    return removed;
  }

  async close(): Promise<void> {
    this.closed = true;
    this.entries.clear();
  }

  // A closed backend answering "not blacklisted" would let logged-out tokens through; refuse instead.
  private assertOpen(): void {
    if (this.closed) throw new Error('memory blacklist is closed');
  }
}

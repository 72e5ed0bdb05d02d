// Work answered before it ended: a run's answer goes out while its engine, container and transcript are still
// being finished. Until that rest has settled, whoever reads or takes what the run held waits for it instead
// of seeing it half-done.

/** The pending rests, by the key of what they hold (a session id, a workspace id). */
export class Settling {
  private readonly pending = new Map<string, Promise<void>>();

  /** `rest` finishes what `key`'s answered run left; its failure is the run's to report, not the waiters'. */
  add(key: string, rest: Promise<unknown>): void {
    const settled = rest.then(
      () => undefined,
      () => undefined,
    );
    this.pending.set(key, settled);
    void settled.then(() => {
      if (this.pending.get(key) === settled) this.pending.delete(key);
    });
  }

  /** Resolves once `key` (or, without one, every key) has no answered run still ending. */
  async settled(key?: string): Promise<void> {
    if (key !== undefined) {
      await this.pending.get(key);
      return;
    }
    await Promise.all([...this.pending.values()]);
  }
}

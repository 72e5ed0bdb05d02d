// Writes to a store made in the background, in order per key: a caller that changes its memory at once (the
// gateway's grants, an agent's status) and must not wait for the database queues the store's write here
// instead. Writes of one key run one after the other, so the store ends in the last state written whatever
// order the database would have answered concurrent statements in; writes of different keys run side by
// side. A write that fails is reported to `onError` and the queue goes on: the caller's memory is the truth
// for this process, the store catches up at the key's next write or is corrected at the next start.

/** How long flush() waits by default: well above any healthy database's answer, well below a stop's patience. */
const DEFAULT_FLUSH_MS = 10_000;

export class OrderedWrites {
  /** Per key, the end of its queued writes (removed once the last one settled). */
  private readonly tails = new Map<string, Promise<void>>();

  constructor(private readonly onError: (key: string, what: string, error: unknown) => void) {}

  /**
   * Queues `write` behind the key's earlier writes. With none pending it starts at once, so a store that
   * answers synchronously (the SQLite files) has written before this returns, as it did when it was called
   * directly.
   */
  add(key: string, what: string, write: () => Promise<void>): void {
    const previous = this.tails.get(key);
    const done: Promise<void> = (previous === undefined ? started(write) : previous.then(write))
      .catch((error: unknown) => this.onError(key, what, error))
      .finally(() => {
        if (this.tails.get(key) === done) this.tails.delete(key);
      });
    this.tails.set(key, done);
  }

  /**
   * Settles once the writes of `key` queued so far have (written or failed and reported), or after `withinMs`.
   * Never rejects.
   */
  async settled(key: string, withinMs = DEFAULT_FLUSH_MS): Promise<void> {
    const tail = this.tails.get(key);
    if (tail === undefined) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([tail, new Promise<void>((resolve) => (timer = setTimeout(resolve, withinMs)))]);
    clearTimeout(timer);
  }

  /**
   * Settles once every write queued so far has, and those queued meanwhile, or once `withinMs` passed (a
   * database that hangs must not hang a shutdown); answers whether everything was written. Never rejects.
   */
  async flush(withinMs = DEFAULT_FLUSH_MS): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    const expired = new Promise<false>((resolve) => {
      // Not unref'd: a stop waiting on this must not see the process end under it; cleared below either way.
      timer = setTimeout(() => resolve(false), withinMs);
    });
    const drained = (async () => {
      while (this.tails.size > 0) await Promise.all(this.tails.values());
      return true as const;
    })();
    try {
      return await Promise.race([drained, expired]);
    } finally {
      clearTimeout(timer);
    }
  }
}

/** `write()`, a synchronous throw turned into a rejection like any other failure. */
function started(write: () => Promise<void>): Promise<void> {
  try {
    return write();
  } catch (error) {
    return Promise.reject(error);
  }
}

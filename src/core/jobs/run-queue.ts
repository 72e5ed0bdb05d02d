// A FIFO concurrency limiter for async jobs: at most `limit` tasks run at once, the others wait in the
// order they were queued. A waiting task can be taken out (a cancelled pending job); closing the queue
// stops it from starting anything more and hands back the keys that never started.
export class RunQueue {
  /** Insertion-ordered: the first entry is the next to start. */
  private readonly waiting = new Map<string, () => Promise<void>>();
  private active = 0;
  private closed = false;

  constructor(
    private readonly limit: number,
    private readonly onTaskError: (key: string, error: unknown) => void = () => undefined,
  ) {
    if (!Number.isInteger(limit) || limit < 1) throw new RangeError(`RunQueue limit must be a positive integer, not ${limit}`);
  }

  get runningCount(): number {
    return this.active;
  }

  get waitingKeys(): string[] {
    return [...this.waiting.keys()];
  }

  enqueue(key: string, task: () => Promise<void>): void {
    if (this.closed) throw new Error('RunQueue is closed');
    if (this.waiting.has(key)) throw new Error(`RunQueue already holds ${key}`);
    this.waiting.set(key, task);
    this.pump();
  }

  /** Takes a task that has not started out of the queue; false when it is not waiting. */
  remove(key: string): boolean {
    return this.waiting.delete(key);
  }

  /** Starts nothing more; returns the keys that were still waiting, in order. */
  close(): string[] {
    this.closed = true;
    const left = [...this.waiting.keys()];
    this.waiting.clear();
    return left;
  }

  private pump(): void {
    while (!this.closed && this.active < this.limit && this.waiting.size > 0) {
      const [key, task] = this.waiting.entries().next().value as [string, () => Promise<void>];
      this.waiting.delete(key);
      this.active += 1;
      void Promise.resolve()
        .then(task)
        .catch((error: unknown) => this.onTaskError(key, error))
        .finally(() => {
          this.active -= 1;
          this.pump();
        });
    }
  }
}

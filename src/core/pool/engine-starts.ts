// The CPU weight of the pool's engines while they start. A refill starts engines at a low weight
// (waitingCpuShares), so that they yield to the runs at work; a ready engine idles at a run's weight. But a
// run that finds no ready engine may wait for one being started (EnginePool.nextStarted): that start is
// then the run's own work, and at the low weight on a busy machine it took seconds (the soak's p95 at
// concurrency 8 reached 10 s). So as many starts as claims wait for are raised to the run's weight at once,
// oldest first (the first start to end goes to the oldest waiting claim).

export type StartWeight = 'waiting' | 'claimed';

/** One engine start in progress. */
export interface EngineStart {
  /** The weight its container is created with. */
  readonly createdWith: StartWeight;
  /**
   * Its container has started: raised now if a claim began waiting for it meanwhile (Podman cannot change
   * the weight of a container that is only created).
   */
  started(containerId: string): Promise<void>;
  /** Its engine is ready: raised now unless it was already, so that it idles at a run's weight. */
  ready(): Promise<void>;
  /** The start ended (ready, failed or disposed of): it no longer counts. */
  end(): void;
}

interface Entry {
  /** The weight it has or is being given. */
  weight: StartWeight;
  containerId: string | undefined;
  raise: Promise<void> | undefined;
}

export class EngineStarts {
  private readonly inProgress: Entry[] = [];

  /** `raise` gives a container a run's CPU weight. */
  constructor(private readonly raise: (containerId: string) => Promise<void>) {}

  begin(weight: StartWeight): EngineStart {
    const entry: Entry = { weight, containerId: undefined, raise: undefined };
    this.inProgress.push(entry);
    const raiseOnce = (): Promise<void> => {
      entry.weight = 'claimed';
      if (entry.containerId === undefined) return Promise.resolve();
      entry.raise ??= this.raise(entry.containerId);
      return entry.raise;
    };
    return {
      createdWith: weight,
      started: async (containerId) => {
        entry.containerId = containerId;
        if (weight === 'waiting' && entry.weight === 'claimed') await raiseOnce();
      },
      ready: async () => {
        if (weight === 'waiting') await raiseOnce();
      },
      end: () => {
        const index = this.inProgress.indexOf(entry);
        if (index >= 0) this.inProgress.splice(index, 1);
      },
    };
  }

  /**
   * `waiting` claims wait for starts in progress: the oldest starts still at the low weight are raised until
   * that many run at a run's weight. A raise that fails here fails the start once its engine is ready
   * (ready() rejects with it): an engine Podman could not update is not handed out.
   */
  promote(waiting: number): void {
    let owed = waiting - this.inProgress.filter((entry) => entry.weight === 'claimed').length;
    for (const entry of this.inProgress) {
      if (owed <= 0) return;
      if (entry.weight === 'claimed') continue;
      entry.weight = 'claimed';
      owed -= 1;
      if (entry.containerId !== undefined) {
        entry.raise = this.raise(entry.containerId);
        entry.raise.catch(() => undefined);
      }
    }
  }
}

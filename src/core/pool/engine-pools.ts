// The two pools of pre-started engines side by side (one for runs, one for persistent agents), started and
// closed together; what they hold is asked of both, so whoever lists containers or session files can tell
// every pooled engine apart from a run's.
import type { EnginePool } from './engine-pool.js';

export class EnginePools {
  constructor(
    readonly run: EnginePool,
    readonly agent: EnginePool,
  ) {}

  async start(): Promise<void> {
    await Promise.all([this.run.start(), this.agent.start()]);
  }

  async close(): Promise<void> {
    await Promise.all([this.run.close(), this.agent.close()]);
  }

  /** Names of every container either pool holds now (being started, ready or being removed). */
  ownContainerNames(): string[] {
    return [...this.run.ownContainerNames(), ...this.agent.ownContainerNames()];
  }

  /** What either pool holds on disk now: its engines' session ids and run ids. */
  ownFiles(): { readonly sessionIds: string[]; readonly runIds: string[] } {
    const run = this.run.ownFiles();
    const agent = this.agent.ownFiles();
    return { sessionIds: [...run.sessionIds, ...agent.sessionIds], runIds: [...run.runIds, ...agent.runIds] };
  }
}

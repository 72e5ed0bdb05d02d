// How a Berth stops, in two parts. First its work, step by step in the order the steps were added: runs in
// flight cancelled (their containers removed while Podman is still there), persistent agents stopped (their
// event streams end only then), the API listener closed. Then every resource, in reverse order of creation.
// A start that fails runs what was added so far: each builder adds its steps as it creates what they undo.
import type { Logger } from 'pino';

export type StopStep = () => Promise<void>;

export class Teardown {
  private readonly work: StopStep[] = [];
  private readonly resources: StopStep[] = [];

  constructor(private readonly logger: Logger) {}

  /** A step of the first part, after the ones added before it. */
  endWork(step: StopStep): void {
    this.work.push(step);
  }

  /** A step of the first part, before every other. */
  endWorkFirst(step: StopStep): void {
    this.work.unshift(step);
  }

  /** A resource released in the second part, before the ones added earlier. */
  release(step: StopStep): void {
    this.resources.push(step);
  }

  /** A resource released after everything else. */
  releaseLast(step: StopStep): void {
    this.resources.unshift(step);
  }

  /** Runs every step once; a step that fails is logged and the ones after it still run. */
  async stop(): Promise<void> {
    for (const step of [...this.work.splice(0), ...this.resources.splice(0).reverse()]) {
      const started = Date.now();
      await step().catch((error: unknown) => this.logger.error({ err: error }, 'cleanup step failed'));
      this.logger.debug({ step: step.name || step.toString().slice(0, 60), durationMs: Date.now() - started }, 'stopped');
    }
  }
}

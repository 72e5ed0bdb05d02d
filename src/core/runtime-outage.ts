// Containers outlive the container runtime's API service: when Podman's service dies mid-run (and Berth
// starts it again, runtime/podman/service-process.ts), a run's or an agent's output stream and its wait
// break while the engine goes on. What follows a container picks it up again from Podman's log, skipping
// what it has already delivered, instead of losing the run.
import type { Containers, ContainerState, OutputChunk } from '../runtime/ports/containers.js';
import { isRuntimeUnreachable } from './runtime-errors.js';

/** How long a run or agent waits for the runtime to answer again before it gives its container up. */
export const RUNTIME_OUTAGE_LIMIT_MS = 60_000;

/** Polls the container until the runtime answers again; undefined when the container is gone or the limit passed. */
export async function containerAfterOutage(runtime: Pick<Containers, 'inspectContainer'>, containerId: string, limitMs = RUNTIME_OUTAGE_LIMIT_MS): Promise<ContainerState | undefined> {
  const deadline = Date.now() + limitMs;
  for (;;) {
    try {
      return await runtime.inspectContainer(containerId);
    } catch (error) {
      if (!isRuntimeUnreachable(error) || Date.now() > deadline) return undefined;
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }
}

/** Bytes of each stream delivered so far, to skip when the output is read again from the log's beginning. */
export class DeliveredOutput {
  private readonly delivered = { stdout: 0, stderr: 0 };

  count(chunk: OutputChunk): void {
    this.delivered[chunk.stream] += chunk.data.length;
  }

  /** The log read from its beginning, without the bytes delivered before; the reader counts on what it takes. */
  async *resume(log: AsyncIterable<OutputChunk>): AsyncIterable<OutputChunk> {
    const skip = { ...this.delivered };
    for await (const chunk of log) {
      const skipped = Math.min(skip[chunk.stream], chunk.data.length);
      skip[chunk.stream] -= skipped;
      if (skipped === chunk.data.length) continue;
      yield { stream: chunk.stream, data: chunk.data.subarray(skipped) };
    }
  }
}

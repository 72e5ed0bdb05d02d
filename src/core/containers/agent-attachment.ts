// How Berth talks to a persistent agent's engine: turns go into the FIFO of its input directory (the engine
// reads it as stdin, engine/layout.ts AGENT_INPUT_FIFO), output comes from an attach to the container's
// stdout/stderr. Neither end closes the engine's input, so dropping this attachment (a Berth process that
// dies or detaches) leaves the engine waiting for its next turn, and a new attachment can be made later.
// The FIFO is written without blocking (turns-input.ts): a stopped engine holds none of Berth's threads.
import type { AttachedContainer, Containers } from '../../runtime/ports/containers.js';
import { AGENT_INPUT_FIFO_NAME } from '../../engine/layout.js';
import type { RunInputs } from './run-inputs.js';
import { openTurnsInput } from './turns-input.js';

/** Creates the turns FIFO in the id's input directory (written already), before the container is created. */
export async function createTurnsFifo(inputs: RunInputs, inputsId: string): Promise<void> {
  await inputs.createFifo(inputsId, AGENT_INPUT_FIFO_NAME);
}

export async function attachAgent(runtime: Pick<Containers, 'attachOutput'>, inputs: RunInputs, containerId: string, inputsId: string): Promise<AttachedContainer> {
  const turns = await openTurnsInput(inputs.pathOf(inputsId, AGENT_INPUT_FIFO_NAME));
  let output: Awaited<ReturnType<Containers['attachOutput']>>;
  try {
    output = await runtime.attachOutput(containerId);
  } catch (error) {
    turns.destroy();
    throw error;
  }
  // A write after the engine is gone fails; its exit is reported by the output, not by this stream.
  turns.on('error', () => undefined);
  return {
    stdin: turns,
    output: output.output,
    close: () => {
      output.close();
      turns.destroy();
    },
  };
}

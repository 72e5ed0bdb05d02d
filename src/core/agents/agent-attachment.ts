// How Berth talks to a persistent agent's engine: turns go into the FIFO of its input directory (the engine
// reads it as stdin, engine/layout.ts AGENT_INPUT_FIFO), output comes from an attach to the container's
// stdout/stderr. Neither end closes the engine's input, so dropping this attachment (a Berth process that
// dies or detaches) leaves the engine waiting for its next turn, and a new attachment can be made later.
import { createWriteStream } from 'node:fs';
import type { AttachedContainer, ContainerRuntime } from '../../runtime/container-runtime.js';
import { AGENT_INPUT_FIFO_NAME } from '../../engine/layout.js';
import type { RunInputs } from '../runs/run-inputs.js';

/** Creates the turns FIFO in the id's input directory (written already), before the container is created. */
export async function createTurnsFifo(inputs: RunInputs, inputsId: string): Promise<void> {
  await inputs.createFifo(inputsId, AGENT_INPUT_FIFO_NAME);
}

export async function attachAgent(runtime: ContainerRuntime, inputs: RunInputs, containerId: string, inputsId: string): Promise<AttachedContainer> {
  const { output, close } = await runtime.attachOutput(containerId);
  // Read-write, like the engine's end: opening never blocks, whether or not the engine has opened it yet.
  const turns = createWriteStream(inputs.pathOf(inputsId, AGENT_INPUT_FIFO_NAME), { flags: 'r+' });
  // A write after the engine is gone fails; its exit is reported by the output, not by this stream.
  turns.on('error', () => undefined);
  return {
    stdin: turns,
    output,
    close: () => {
      close();
      turns.destroy();
    },
  };
}

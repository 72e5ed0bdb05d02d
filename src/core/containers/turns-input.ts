// A persistent agent's turns FIFO as Berth writes it: without ever holding a thread, and within a bound.
// The FIFO's reader is the engine, which code in its container can stop (SIGSTOP, ptrace). A blocking
// write of more than the pipe's 64 KiB to a stopped reader never returns, and fs streams write on libuv's
// thread pool (4 threads): four such writes froze every file read, DNS lookup and zlib call of the service,
// and its shutdown. So the FIFO is opened O_NONBLOCK and written through a net.Socket, as Node writes
// process.stdout to a pipe: what the pipe cannot take waits in memory (at most one prompt) and goes on
// from the event loop when the engine reads again. A turn that is not taken within the bound is reported.
import { constants, fstat, open, close } from 'node:fs';
import { Socket } from 'node:net';
import { promisify } from 'node:util';

const openFd = promisify(open);
const fstatFd = promisify(fstat);

/** A turn the engine did not read within the bound: its reader is stopped or stuck. */
export class TurnNotTaken extends Error {
  constructor(readonly timeoutMs: number) {
    super(`the engine did not read its turn within ${timeoutMs} ms`);
    this.name = 'TurnNotTaken';
  }
}

/**
 * Opens the turns FIFO for writing without blocking. Read-write like the engine's end, so that opening
 * never waits for a reader and the engine never reads an end of input; never read by Berth (a read would
 * take the engine's turns). O_NOFOLLOW and the FIFO check: the path is Berth's own, but nothing else is
 * ever opened by mistake.
 */
export async function openTurnsInput(path: string): Promise<Socket> {
  const fd = await openFd(path, constants.O_RDWR | constants.O_NONBLOCK | constants.O_NOFOLLOW);
  try {
    if (!(await fstatFd(fd)).isFIFO()) throw new Error(`${path} is not a FIFO`);
    // readable: false keeps libuv from ever reading the FIFO; writes go through epoll, not the thread pool.
    return new Socket({ fd, readable: false, writable: true });
  } catch (error) {
    close(fd, () => undefined);
    throw error;
  }
}

/**
 * Writes `data` and resolves once the kernel has all of it (the engine read what did not fit in the pipe),
 * or rejects with TurnNotTaken after `timeoutMs`, or with the stream's error. The write is not undone on
 * timeout: the caller ends the stream (and the agent).
 */
export function writeWithin(stream: NodeJS.WritableStream, data: string, timeoutMs: number): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new TurnNotTaken(timeoutMs)), timeoutMs);
    stream.write(data, (error) => {
      clearTimeout(timer);
      if (error) reject(error);
      else resolve();
    });
  });
}

// A client that goes away before its run ends must not leave the run going: its container is killed.
import type { ServerResponse } from 'node:http';

export function abortOnDisconnect(response: ServerResponse): AbortSignal {
  const controller = new AbortController();
  // 'close' also follows a normal end; only a close before the response finished means the client left.
  response.once('close', () => {
    if (!response.writableFinished) controller.abort();
  });
  return controller.signal;
}

// A client that goes away before its run ends must not leave the run going: its container is killed.
import type { IncomingMessage } from 'node:http';

export function abortOnDisconnect(request: IncomingMessage): AbortSignal {
  const controller = new AbortController();
  const socket = request.socket;
  const onClose = () => {
    // 'close' on the socket also fires after a normal response; by then the run is over and abort is a no-op.
    controller.abort();
  };
  socket.once('close', onClose);
  return controller.signal;
}

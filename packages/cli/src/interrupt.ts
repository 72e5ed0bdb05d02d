// Ctrl-C as an AbortSignal: commands hand the signal to the SDK, so the request in flight is aborted
// (for a run, the server then removes its container) and the command reports what was left behind.

export interface Interrupt {
  readonly signal: AbortSignal;
  /** Stops listening for Ctrl-C (the default handling applies again). */
  dispose(): void;
}

/** Aborts the returned signal on the first Ctrl-C; a second one exits at once, as a shell user expects. */
export function onInterrupt(): Interrupt {
  const controller = new AbortController();
  const handler = () => {
    if (controller.signal.aborted) process.exit(130);
    controller.abort(new Error('interrupted'));
  };
  process.on('SIGINT', handler);
  return { signal: controller.signal, dispose: () => process.off('SIGINT', handler) };
}

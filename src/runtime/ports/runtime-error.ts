// The one error type every part of the runtime throws in Berth's terms; core translates it once
// (core/runtime-errors.ts), so no Podman error type travels past runtime/.

/** A failure of the container runtime, in Berth's terms: unreachable, or it refused/failed the call. */
export class RuntimeError extends Error {
  constructor(
    message: string,
    readonly unreachable: boolean,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'RuntimeError';
  }
}

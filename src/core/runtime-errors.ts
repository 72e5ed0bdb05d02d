// Podman being unreachable is the caller's 503 (`container runtime unavailable`), whichever core service
// met it. The translation happens here, once, on the runtime core services are given: http/ then knows
// only Berth's error catalogue, never the runtime's error types.
import { BerthError, errors } from '../errors.js';
import { RuntimeError } from '../runtime/ports/runtime-error.js';

export function translateRuntimeError(error: unknown): unknown {
  return error instanceof RuntimeError && error.unreachable ? errors.runtimeUnavailable(error.message) : error;
}

/** Whether the runtime could not be reached, before or after translation. */
export function isRuntimeUnreachable(error: unknown): boolean {
  return (error instanceof RuntimeError && error.unreachable) || (error instanceof BerthError && error.code === 'BERTH_ERR_RUNTIME_UNAVAILABLE');
}

/**
 * The same runtime (or any slice of it), whose promise-returning methods reject with Berth errors where the
 * runtime was unreachable.
 */
export function withTranslatedErrors<Runtime extends object>(runtime: Runtime): Runtime {
  return new Proxy(runtime, {
    get(target, key) {
      // Looked up on every access, so a method replaced on the target later is still the one called.
      const value: unknown = Reflect.get(target, key, target);
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        const result: unknown = value.apply(target, args);
        return result instanceof Promise ? result.catch((error: unknown) => Promise.reject(translateRuntimeError(error))) : result;
      };
    },
  });
}

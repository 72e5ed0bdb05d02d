// Turning whatever went wrong into one line a person can act on: the server's own error text and HTTP
// status, a hint where one helps, and an exit code. Never a stack trace.
import { BerthError, BerthVersionError } from '@berth/client';

/** A failure the CLI itself reports (an agent that exited, a job that failed), with its exit code. */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode = 1,
    readonly hint?: string,
  ) {
    super(message);
    this.name = 'CliError';
  }
}

/** Ctrl-C ended the command; what was interrupted has been told (`message`, printed on stderr). */
export class Interrupted extends CliError {
  constructor(message: string) {
    super(message, 130);
    this.name = 'Interrupted';
  }
}

export interface Report {
  readonly message: string;
  readonly hint?: string;
  readonly exitCode: number;
}

// Codes of a connection that could not be made at all (a dropped connection is reported as it is).
const UNREACHABLE = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'ETIMEDOUT', 'UND_ERR_CONNECT_TIMEOUT']);

/** What to print for `error`, raised while talking to the Berth at `url`. */
export function report(error: unknown, url: string): Report {
  if (error instanceof Interrupted) return { message: error.message, exitCode: error.exitCode };
  if (error instanceof CliError) return { message: `berth: ${error.message}`, exitCode: error.exitCode, ...(error.hint ? { hint: error.hint } : {}) };
  const unreachable = networkCode(error);
  if (unreachable !== undefined) {
    return {
      message: `berth: cannot reach Berth at ${url} (${unreachable})`,
      hint: 'is Berth running? start it with `make up`, or set --url/BERTH_URL',
      exitCode: 1,
    };
  }
  if (error instanceof BerthVersionError) {
    return { message: `berth: ${error.message}`, hint: '`berth version` shows both versions', exitCode: 1 };
  }
  if (error instanceof BerthError) {
    const hint = hintFor(error);
    return { message: `berth: ${error.error} (HTTP ${error.status})`, exitCode: 1, ...(hint ? { hint } : {}) };
  }
  return { message: `berth: ${error instanceof Error ? error.message : String(error)}`, exitCode: 1 };
}

function hintFor(error: BerthError): string | undefined {
  if (error.status === 401) return 'run `berth login` (with the same --url) to sign in';
  if (error.status === 429) return 'the server is rate limiting or at its container limit; retry in a moment';
  return undefined;
}

/** The system error code when `error` (or one of its causes) is a failure to reach the server. */
function networkCode(error: unknown): string | undefined {
  for (let cause: unknown = error, depth = 0; cause instanceof Error && depth < 5; cause = cause.cause, depth += 1) {
    const code = (cause as NodeJS.ErrnoException).code;
    if (code !== undefined && UNREACHABLE.has(code)) return code === 'ENOTFOUND' ? `unknown host` : code;
    if (cause instanceof AggregateError) {
      const inner = cause.errors.map(networkCode).find((c) => c !== undefined);
      if (inner !== undefined) return inner;
    }
  }
  return undefined;
}

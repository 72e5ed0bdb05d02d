// How a run ended, decided from what its supervision saw: the container's exit, why Berth stopped it (if it
// did), the engine's result line and its stderr. Pure, so that every combination is unit-tested
// (test/unit/run-exit-classification.test.ts); RunExecutor.watch() gathers the facts and asks here.
import type { ContainerExit } from '../../runtime/ports/containers.js';
import { HOOK_FAILED_EXIT_CODE } from '../../engine/command.js';
import type { ResultEnvelope } from '../../engine/stream-json.js';

/** How a run ended. `crashed` covers every end the engine did not choose itself. */
export type RunOutcome =
  | { readonly kind: 'completed'; readonly envelope: ResultEnvelope; readonly rawOutput: string }
  | { readonly kind: 'failed'; readonly message: string; readonly envelope: ResultEnvelope | undefined; readonly rawOutput: string }
  | {
      readonly kind: 'crashed';
      readonly reason: 'oom' | 'timeout' | 'signal' | 'cancelled';
      readonly exitCode: number;
      readonly signal: string;
      readonly partialOutput: string;
      readonly taskCompleted: boolean;
    };

/**
 * Why Berth killed the run's container: its timeout, its cancellation (client gone, job deleted), or an
 * engine that had not exited LINGER_AFTER_RESULT_MS after its successful result.
 */
export type StopReason = 'timeout' | 'cancelled' | 'lingered';

/** What the supervision of a run saw once its container exited. */
export interface ExitFacts {
  readonly exit: ContainerExit;
  /** Undefined when Berth did not stop the container. */
  readonly stopReason: StopReason | undefined;
  /** The engine's last result line, if it printed one. */
  readonly envelope: ResultEnvelope | undefined;
  /** The tail of the engine's stderr. */
  readonly stderr: string;
  /** The engine's stdout lines as kept (output-tail.ts). */
  readonly rawOutput: string;
}

const SIGNALS: Record<number, string> = { 1: 'SIGHUP', 2: 'SIGINT', 6: 'SIGABRT', 9: 'SIGKILL', 11: 'SIGSEGV', 13: 'SIGPIPE', 15: 'SIGTERM' };

/** The signal a shell-style exit code above 128 stands for, '' for an exit the process chose. */
export function signalOfExitCode(exitCode: number): string {
  return exitCode > 128 ? (SIGNALS[exitCode - 128] ?? `SIG${exitCode - 128}`) : '';
}

function lastLines(text: string, count: number): string {
  return text.trim().split('\n').slice(-count).join('\n');
}

// An exit by SIGKILL that Berth did not send is an OOM kill when the runtime says so. When it cannot tell
// (cgroup v1 without the kernel's log to read, runtime/kernel-oom-log.ts) it is taken as the OOM killer's:
// inside its PID namespace the engine is init, which no process of the container can SIGKILL, so only the
// host kernel (or a host administrator) can have sent it.
export function classifyExit(facts: ExitFacts): RunOutcome {
  const { exit, stopReason, envelope, stderr, rawOutput } = facts;
  // Stopped for lingering after its result: the turn itself completed.
  if (stopReason === 'lingered' && envelope && !envelope.isError) return { kind: 'completed', envelope, rawOutput };
  const oom = exit.oomKilled ?? (exit.exitCode === 137 && !stopReason);
  if (oom || stopReason || exit.exitCode > 128) {
    const reason = oom ? 'oom' : stopReason === 'timeout' || stopReason === 'cancelled' ? stopReason : 'signal';
    return {
      kind: 'crashed',
      reason,
      exitCode: exit.exitCode,
      signal: signalOfExitCode(exit.exitCode) || (reason === 'oom' || stopReason ? 'SIGKILL' : ''),
      partialOutput: rawOutput,
      taskCompleted: envelope !== undefined && !envelope.isError,
    };
  }
  if (envelope && !envelope.isError && exit.exitCode === 0) return { kind: 'completed', envelope, rawOutput };
  const message =
    exit.exitCode === HOOK_FAILED_EXIT_CODE && !envelope
      ? `container.lifecycle: ${lastLines(stderr, 20)}`
      : envelope?.result || lastLines(stderr, 20) || `engine exited with code ${exit.exitCode} and no result`;
  return { kind: 'failed', message, envelope, rawOutput };
}

/**
 * A run whose supervision failed before its container's exit was known (the runtime refused, the output
 * broke): a cancelled run is reported as such, having been killed by Berth; any other such failure is the
 * runtime's error to raise (undefined).
 */
export function classifyInterruption(facts: { readonly stopReason: StopReason | undefined; readonly aborted: boolean; readonly partialOutput: string }): RunOutcome | undefined {
  if (facts.stopReason !== 'cancelled' && !facts.aborted) return undefined;
  return { kind: 'crashed', reason: 'cancelled', exitCode: 137, signal: 'SIGKILL', partialOutput: facts.partialOutput, taskCompleted: false };
}

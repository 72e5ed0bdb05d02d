// How a run ended, from what its supervision saw (core/runs/exit-classification.ts): each rule on its own,
// then every combination of exit code, OOM verdict, Berth's stop reason and result line against the rules
// that must hold whatever the combination.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { classifyExit, classifyInterruption, signalOfExitCode, type ExitFacts, type RunOutcome, type StopReason } from '../../src/core/runs/exit-classification.js';
import { HOOK_FAILED_EXIT_CODE } from '../../src/engine/command.js';
import type { ResultEnvelope } from '../../src/engine/stream-json.js';

const success: ResultEnvelope = {
  subtype: 'success', isError: false, result: 'done', sessionId: 's', totalCostUsd: 0, usage: undefined, structuredOutput: undefined, apiErrorStatus: undefined, model: undefined,
};
const engineError: ResultEnvelope = { ...success, subtype: 'error_during_execution', isError: true, result: 'the model refused' };

function facts(overrides: Partial<ExitFacts> & { readonly exitCode?: number; readonly oomKilled?: boolean | undefined }): ExitFacts {
  const { exitCode = 0, oomKilled, ...rest } = overrides;
  return { exit: { exitCode, oomKilled }, stopReason: undefined, envelope: undefined, stderr: '', rawOutput: 'out', ...rest };
}

function crashed(outcome: RunOutcome): Extract<RunOutcome, { kind: 'crashed' }> {
  assert.equal(outcome.kind, 'crashed', JSON.stringify(outcome));
  return outcome as Extract<RunOutcome, { kind: 'crashed' }>;
}

function failed(outcome: RunOutcome): Extract<RunOutcome, { kind: 'failed' }> {
  assert.equal(outcome.kind, 'failed', JSON.stringify(outcome));
  return outcome as Extract<RunOutcome, { kind: 'failed' }>;
}

describe('classifyExit', () => {
  it('an engine that exits 0 after a successful result completed, with its output', () => {
    assert.deepEqual(classifyExit(facts({ envelope: success })), { kind: 'completed', envelope: success, rawOutput: 'out' });
  });

  it('an engine stopped for lingering after a successful result completed', () => {
    assert.deepEqual(classifyExit(facts({ exitCode: 137, stopReason: 'lingered', envelope: success })), { kind: 'completed', envelope: success, rawOutput: 'out' });
  });

  it('an engine stopped for lingering after an error result crashed by signal', () => {
    const outcome = crashed(classifyExit(facts({ exitCode: 137, stopReason: 'lingered', envelope: engineError })));
    assert.equal(outcome.reason, 'signal');
    assert.equal(outcome.signal, 'SIGKILL');
    assert.equal(outcome.taskCompleted, false);
  });

  it('an exit the runtime calls an OOM kill is oom, whatever the code and even after a result', () => {
    const outcome = crashed(classifyExit(facts({ exitCode: 1, oomKilled: true, envelope: success })));
    assert.deepEqual(outcome, { kind: 'crashed', reason: 'oom', exitCode: 1, signal: 'SIGKILL', partialOutput: 'out', taskCompleted: true });
  });

  it('a SIGKILL Berth did not send is the OOM killer\'s when the runtime cannot tell', () => {
    assert.equal(crashed(classifyExit(facts({ exitCode: 137, oomKilled: undefined }))).reason, 'oom');
  });

  it('a SIGKILL the runtime says was no OOM kill is a signal', () => {
    const outcome = crashed(classifyExit(facts({ exitCode: 137, oomKilled: false })));
    assert.equal(outcome.reason, 'signal');
    assert.equal(outcome.signal, 'SIGKILL');
  });

  it('a SIGKILL Berth sent is its timeout or its cancellation, not an OOM kill', () => {
    assert.equal(crashed(classifyExit(facts({ exitCode: 137, stopReason: 'timeout' }))).reason, 'timeout');
    assert.equal(crashed(classifyExit(facts({ exitCode: 137, stopReason: 'cancelled' }))).reason, 'cancelled');
  });

  it('a run Berth stopped is a crash with SIGKILL even when the engine exited by itself meanwhile', () => {
    const outcome = crashed(classifyExit(facts({ exitCode: 0, stopReason: 'timeout', envelope: success })));
    assert.deepEqual(outcome, { kind: 'crashed', reason: 'timeout', exitCode: 0, signal: 'SIGKILL', partialOutput: 'out', taskCompleted: true });
  });

  it('an exit by another signal names it', () => {
    const outcome = crashed(classifyExit(facts({ exitCode: 139 })));
    assert.equal(outcome.reason, 'signal');
    assert.equal(outcome.signal, 'SIGSEGV');
    assert.equal(crashed(classifyExit(facts({ exitCode: 128 + 40 }))).signal, 'SIG40');
  });

  it('an error result is the failure\'s message', () => {
    assert.deepEqual(classifyExit(facts({ exitCode: 1, envelope: engineError, stderr: 'noise' })), {
      kind: 'failed', message: 'the model refused', envelope: engineError, rawOutput: 'out',
    });
  });

  it('a successful result with a non-zero exit is a failure', () => {
    assert.equal(failed(classifyExit(facts({ exitCode: 2, envelope: success }))).message, 'done');
  });

  it('without a result, the failure is the last 20 lines of stderr', () => {
    const stderr = `${Array.from({ length: 25 }, (_, i) => `line ${i}`).join('\n')}\n\n`;
    const outcome = failed(classifyExit(facts({ exitCode: 1, stderr })));
    assert.equal(outcome.message, Array.from({ length: 20 }, (_, i) => `line ${i + 5}`).join('\n'));
    assert.equal(outcome.envelope, undefined);
  });

  it('without a result or stderr, the failure names the exit code', () => {
    assert.equal(failed(classifyExit(facts({ exitCode: 3 }))).message, 'engine exited with code 3 and no result');
    assert.equal(failed(classifyExit(facts({ exitCode: 0 }))).message, 'engine exited with code 0 and no result');
  });

  it('a failed lifecycle hook is reported as container.lifecycle with its stderr', () => {
    const outcome = failed(classifyExit(facts({ exitCode: HOOK_FAILED_EXIT_CODE, stderr: 'berth: lifecycle hook failed with exit code 2\n' })));
    assert.equal(outcome.message, 'container.lifecycle: berth: lifecycle hook failed with exit code 2');
  });

  it('the hook\'s exit code after a result is the engine\'s own failure, not a hook\'s', () => {
    assert.equal(failed(classifyExit(facts({ exitCode: HOOK_FAILED_EXIT_CODE, envelope: engineError }))).message, 'the model refused');
  });

  describe('every combination', () => {
    const exitCodes = [0, 1, 2, HOOK_FAILED_EXIT_CODE, 124, 128, 129, 130, 137, 139, 143, 255];
    const oomVerdicts = [undefined, true, false];
    const stops: (StopReason | undefined)[] = [undefined, 'timeout', 'cancelled', 'lingered'];
    const envelopes = [undefined, success, engineError];
    const cases = exitCodes.flatMap((exitCode) =>
      oomVerdicts.flatMap((oomKilled) => stops.flatMap((stopReason) => envelopes.map((envelope) => ({ exitCode, oomKilled, stopReason, envelope })))),
    );

    it(`${cases.length} combinations each follow the rules`, () => {
      for (const c of cases) {
        const outcome = classifyExit(facts({ ...c, stderr: 'stderr tail' }));
        const label = JSON.stringify({ ...c, envelope: c.envelope?.subtype });
        const ok = c.envelope !== undefined && !c.envelope.isError;
        const lingeredAfterSuccess = c.stopReason === 'lingered' && ok;
        const oom = !lingeredAfterSuccess && (c.oomKilled ?? (c.exitCode === 137 && c.stopReason === undefined));
        const killed = c.stopReason !== undefined || c.exitCode > 128;
        if (lingeredAfterSuccess || (!oom && !killed && ok && c.exitCode === 0)) {
          assert.deepEqual(outcome, { kind: 'completed', envelope: c.envelope, rawOutput: 'out' }, label);
        } else if (oom || killed) {
          const crash = crashed(outcome);
          const reason = oom ? 'oom' : c.stopReason === 'timeout' || c.stopReason === 'cancelled' ? c.stopReason : 'signal';
          assert.equal(crash.reason, reason, label);
          assert.equal(crash.exitCode, c.exitCode, label);
          assert.equal(crash.signal, c.exitCode > 128 ? signalOfExitCode(c.exitCode) : 'SIGKILL', label);
          assert.equal(crash.partialOutput, 'out', label);
          assert.equal(crash.taskCompleted, ok, label);
        } else {
          const failure = failed(outcome);
          assert.equal(failure.envelope, c.envelope, label);
          assert.equal(failure.rawOutput, 'out', label);
          const expected =
            c.envelope !== undefined ? c.envelope.result : c.exitCode === HOOK_FAILED_EXIT_CODE ? 'container.lifecycle: stderr tail' : 'stderr tail';
          assert.equal(failure.message, expected, label);
        }
      }
    });
  });
});

describe('signalOfExitCode', () => {
  it('names the signal of a code above 128 and none below', () => {
    assert.deepEqual([0, 1, 128, 129, 130, 134, 137, 141, 143, 200].map(signalOfExitCode), ['', '', '', 'SIGHUP', 'SIGINT', 'SIGABRT', 'SIGKILL', 'SIGPIPE', 'SIGTERM', 'SIG72']);
  });
});

describe('classifyInterruption', () => {
  it('a run cancelled before its exit was known is a cancellation by SIGKILL, with what it printed', () => {
    const expected = { kind: 'crashed', reason: 'cancelled', exitCode: 137, signal: 'SIGKILL', partialOutput: 'partial', taskCompleted: false };
    assert.deepEqual(classifyInterruption({ stopReason: 'cancelled', aborted: false, partialOutput: 'partial' }), expected);
    assert.deepEqual(classifyInterruption({ stopReason: undefined, aborted: true, partialOutput: 'partial' }), expected);
    assert.deepEqual(classifyInterruption({ stopReason: 'timeout', aborted: true, partialOutput: 'partial' }), expected);
  });

  it('any other failure of the supervision is left to raise', () => {
    for (const stopReason of [undefined, 'timeout', 'lingered'] as const) {
      assert.equal(classifyInterruption({ stopReason, aborted: false, partialOutput: 'partial' }), undefined, String(stopReason));
    }
  });
});

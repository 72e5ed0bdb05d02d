// What a restart reads of a surviving agent's log (core/agents/agent-restore.ts): nothing for an idle agent;
// for one with a turn in progress, only what was logged since that turn started, bounded in lines and bytes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { findAgentAgain, RESTORE_LOG_BYTES, RESTORE_LOG_LINES } from '../../src/core/agents/agent-restore.js';
import { createTurnsFifo } from '../../src/core/containers/agent-attachment.js';
import { RunInputs } from '../../src/core/containers/run-inputs.js';
import type { LogTailOptions } from '../../src/runtime/ports/containers.js';
import type { AgentRecord } from '../../src/store/agents/agent-store.js';
import type { PreparedSession } from '../../src/core/sessions/session-store.js';

const TURN_START = '2026-11-26T03:00:00.000Z';

function record(overrides: Partial<AgentRecord> = {}): AgentRecord {
  return {
    id: 'agent-1', owner: 'o', sessionId: 's', runId: 'run-1', inputsId: 'agent-1', container: 'c1', workdir: '/workspace',
    persistent: true, idleTimeoutSeconds: 60, idleTimeoutDisabled: false, status: 'generating', currentTurn: 'turn-3',
    turnsCompleted: 2, turnsEnded: 2, warmUpResults: 0, exitError: null, createdAt: TURN_START, lastActivityAt: TURN_START, exitedAt: null,
    ...overrides,
  };
}

async function restoreWith(agent: AgentRecord, log: string) {
  const dir = await mkdtemp(join(tmpdir(), 'berth-restore-'));
  const inputs = new RunInputs(dir, dir);
  await inputs.init();
  await inputs.write(agent.inputsId, []);
  await createTurnsFifo(inputs, agent.inputsId);
  const reads: { lines: number; options: LogTailOptions | undefined }[] = [];
  const runtime = {
    inspectContainer: async () => ({ id: 'c1', running: true }),
    attachOutput: async () => ({ output: (async function* () {})(), close: () => undefined }),
    logTail: async (_id: string, lines: number, options?: LogTailOptions) => {
      reads.push({ lines, options });
      return log;
    },
  };
  const session = { release: async () => undefined } as unknown as PreparedSession;
  const found = await findAgentAgain(
    { container: { runtime, inputs, log: pino({ level: 'silent' }) } as never, sessions: { reclaim: async () => session }, log: pino({ level: 'silent' }) },
    agent,
  );
  if (found.kind === 'running') found.container.detach();
  await rm(dir, { recursive: true, force: true });
  return { found, reads };
}

test('an idle agent\'s log is not read at a restart', async () => {
  const { found, reads } = await restoreWith(record({ status: 'idle', currentTurn: null }), '{"type":"result","is_error":false}\n');
  assert.deepEqual(reads, []);
  assert.equal(found.kind, 'running');
  if (found.kind === 'running') assert.deepEqual([found.turnsEnded, found.turnsCompleted, found.currentTurn], [2, 2, undefined]);
});

test('a turn in progress: only the log since its start is read, bounded, and its result ends it', async () => {
  const { found, reads } = await restoreWith(record(), '{"type":"assistant"}\n{"type":"result","subtype":"success","is_error":false,"result":"done"}\n');
  assert.deepEqual(reads, [{ lines: RESTORE_LOG_LINES, options: { sinceMs: Date.parse(TURN_START), maxBytes: RESTORE_LOG_BYTES } }]);
  assert.ok(RESTORE_LOG_LINES <= 1_000 && RESTORE_LOG_BYTES <= 16 * 1024 * 1024);
  assert.equal(found.kind, 'running');
  if (found.kind === 'running') assert.deepEqual([found.turnsEnded, found.turnsCompleted, found.currentTurn], [3, 3, undefined]);
});

test('a turn in progress whose result is not in the log yet goes on; a failed one ends without completing', async () => {
  const going = await restoreWith(record(), '{"type":"assistant"}\n');
  if (going.found.kind === 'running') assert.deepEqual([going.found.turnsEnded, going.found.currentTurn], [2, 'turn-3']);
  const failed = await restoreWith(record(), '{"type":"result","subtype":"error_during_execution","is_error":true}\n');
  if (failed.found.kind === 'running') assert.deepEqual([failed.found.turnsEnded, failed.found.turnsCompleted, failed.found.currentTurn], [3, 2, undefined]);
});

// The AgentStore contract (src/store/agents/agent-store.ts) as one suite any backend runs: pass a name, a
// function that opens a fresh, empty store, and one that opens the same records again (a restart; the store
// `open` answered last is closed first). Each test closes its store.
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import type { AgentRecord, AgentStore } from '../../src/store/agents/agent-store.js';

export interface AgentStoreOpeners {
  open(): AgentStore | Promise<AgentStore>;
  reopen(): AgentStore | Promise<AgentStore>;
}

export const T0 = '2030-01-01T00:00:00.000Z';
const T1 = '2030-01-01T00:00:01.000Z';
const T2 = '2030-01-01T00:00:02.000Z';

export function agentRecord(n: number, extra: Partial<AgentRecord> = {}): AgentRecord {
  return {
    id: `agent-${n}`,
    owner: 'client-a',
    sessionId: `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`,
    runId: `run${n}`,
    inputsId: `inputs${n}`,
    container: `berth-run${n}`,
    workdir: '/workspace',
    persistent: true,
    idleTimeoutSeconds: 600,
    idleTimeoutDisabled: false,
    status: 'idle',
    currentTurn: null,
    turnsCompleted: 0,
    turnsEnded: 0,
    warmUpResults: 0,
    exitError: null,
    createdAt: T0,
    lastActivityAt: T0,
    exitedAt: null,
    ...extra,
  };
}

/** What an engine's last words in an exit error may hold: quotes, a NUL, characters beyond the BMP. */
const AWKWARD_TEXT = 'agent: the engine exited: say "hi" \\ \n\u0000nul é 🚀';

export function agentStoreContract(name: string, openers: AgentStoreOpeners): void {
  describe(`AgentStore contract: ${name}`, () => {
    let store: AgentStore;
    beforeEach(async () => {
      store = await openers.open();
    });
    afterEach(() => store.close());

    it('keeps nothing at first', async () => {
      assert.deepEqual(await store.live(), []);
      assert.deepEqual(await store.exited(), []);
    });

    it('reads back every field of a new agent, a pooled engine\'s warm-up included', async () => {
      const pooled = agentRecord(1, { warmUpResults: 1, persistent: false, idleTimeoutDisabled: true, status: 'generating', currentTurn: 'turn-1' });
      await store.insert(pooled);
      await store.insert(agentRecord(2));
      assert.deepEqual(await store.live(), [pooled, agentRecord(2)]);
    });

    it('lists agents oldest first, then by id', async () => {
      await store.insert(agentRecord(3, { createdAt: T1 }));
      await store.insert(agentRecord(2, { createdAt: T0 }));
      await store.insert(agentRecord(1, { createdAt: T1 }));
      assert.deepEqual((await store.live()).map((agent) => agent.id), ['agent-2', 'agent-1', 'agent-3']);
    });

    it('refuses a second agent with the same id', async () => {
      await store.insert(agentRecord(1));
      await assert.rejects(async () => store.insert(agentRecord(1, { owner: 'client-b' })));
      assert.deepEqual(await store.live(), [agentRecord(1)]);
    });

    it('keeps the progress of an agent, and lists it exited once it ended', async () => {
      await store.insert(agentRecord(1, { warmUpResults: 1 }));
      await store.update('agent-1', { status: 'generating', currentTurn: 'turn-7', turnsCompleted: 1, turnsEnded: 1, exitError: null, lastActivityAt: T1, exitedAt: null });
      assert.deepEqual(await store.live(), [agentRecord(1, { warmUpResults: 1, status: 'generating', currentTurn: 'turn-7', turnsCompleted: 1, turnsEnded: 1, lastActivityAt: T1 })]);
      await store.update('agent-1', { status: 'exited', currentTurn: null, turnsCompleted: 2, turnsEnded: 3, exitError: AWKWARD_TEXT, lastActivityAt: T1, exitedAt: T1 });
      assert.deepEqual(await store.live(), []);
      assert.deepEqual(await store.exited(), [agentRecord(1, { warmUpResults: 1, status: 'exited', turnsCompleted: 2, turnsEnded: 3, exitError: AWKWARD_TEXT, lastActivityAt: T1, exitedAt: T1 })]);
    });

    it('removes the exited agents that exited before a moment, and only those', async () => {
      await store.insert(agentRecord(1, { status: 'exited', exitedAt: T1, exitError: 'agent: stopped' }));
      await store.insert(agentRecord(2, { status: 'exited', exitedAt: T2 }));
      await store.insert(agentRecord(3));
      assert.equal(await store.removeExitedBefore('2030-01-01T00:00:00.500Z'), 0);
      assert.equal(await store.removeExitedBefore('2030-01-01T00:00:01.500Z'), 1);
      assert.deepEqual((await store.exited()).map((agent) => agent.id), ['agent-2']);
      assert.deepEqual((await store.live()).map((agent) => agent.id), ['agent-3']);
    });

    it('removes an agent\'s record; unknown ids change nothing', async () => {
      await store.insert(agentRecord(1));
      await store.insert(agentRecord(2));
      await store.remove('agent-1');
      await store.remove('agent-unknown');
      await store.update('agent-unknown', { status: 'idle', currentTurn: null, turnsCompleted: 0, turnsEnded: 0, exitError: null, lastActivityAt: T1, exitedAt: null });
      assert.deepEqual(await store.live(), [agentRecord(2)]);
    });

    it('keeps its agents across a reopen', async () => {
      await store.insert(agentRecord(1, { status: 'generating', currentTurn: 'turn-1' }));
      await store.insert(agentRecord(2, { status: 'exited', exitedAt: T1 }));
      await store.close();
      store = await openers.reopen();
      assert.deepEqual(await store.live(), [agentRecord(1, { status: 'generating', currentTurn: 'turn-1' })]);
      assert.deepEqual(await store.exited(), [agentRecord(2, { status: 'exited', exitedAt: T1 })]);
    });

    it('refuses work once closed', async () => {
      await store.close();
      await assert.rejects(async () => store.insert(agentRecord(1)));
      await assert.rejects(async () => store.live());
      store = await openers.reopen();
    });
  });
}

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Agent } from '../../src/core/agents/agent.js';
import { IdleWatchdog, START_TIMEOUT_MS, type Timers } from '../../src/core/agents/watchdog.js';

const READY = { kind: 'line' as const, text: '{"type":"control_response","response":{"request_id":"berth-ready"}}' };

function setup(agentOptions: { idleTimeoutSeconds: number; disabled?: boolean }) {
  let clock = 0;
  const now = () => clock;
  const stopped: string[] = [];
  const forgotten: string[] = [];
  let tickFn: (() => void) | undefined;
  let tickMs = 0;
  const timers: Timers = {
    every(ms, fn) {
      tickMs = ms;
      tickFn = fn;
      return () => (tickFn = undefined);
    },
  };
  const agent = new Agent({
    id: 'agent-1', sessionId: 's', idleTimeoutSeconds: agentOptions.idleTimeoutSeconds, idleTimeoutDisabled: agentOptions.disabled ?? false,
    write: async () => undefined, now,
  });
  const agents = [agent];
  const watchdog = new IdleWatchdog(
    {
      agents: () => agents,
      stop: (a, reason) => {
        stopped.push(reason);
        a.exit(reason);
      },
      forget: (a) => {
        forgotten.push(a.id);
        agents.splice(agents.indexOf(a), 1);
      },
    },
    { tickMs: 30_000, exitedRetentionMs: 300_000, now, timers },
  );
  watchdog.start();
  /** Moves the fake clock by one tick interval and runs the tick. */
  const tick = () => {
    clock += tickMs;
    tickFn?.();
  };
  return { agent, watchdog, stopped, forgotten, tick, tickMs: () => tickMs, advance: (ms: number) => (clock += ms), running: () => tickFn !== undefined };
}

test('the watchdog ticks every 30 s and stops an idle agent at the first tick after its idle timeout', () => {
  const s = setup({ idleTimeoutSeconds: 60 });
  assert.equal(s.tickMs(), 30_000);
  s.agent.stdout(READY);
  s.tick(); // 30 s
  assert.deepEqual(s.stopped, []);
  s.tick(); // 60 s
  assert.deepEqual(s.stopped, ['agent: idle timeout reached']);
  assert.equal(s.agent.snapshot().exit_error, 'agent: idle timeout reached');
});

test('a send resets the idle clock, and a generating agent is never stopped for idleness', () => {
  const s = setup({ idleTimeoutSeconds: 60 });
  s.agent.stdout(READY);
  s.tick();
  s.agent.send('work');
  for (let i = 0; i < 10; i++) s.tick();
  assert.deepEqual(s.stopped, []);
  s.agent.stdout({ kind: 'line', text: '{"type":"result","is_error":false}' });
  s.tick();
  assert.deepEqual(s.stopped, []);
  s.tick();
  assert.deepEqual(s.stopped, ['agent: idle timeout reached']);
});

test('an agent with the watchdog disabled is never stopped for idleness', () => {
  const s = setup({ idleTimeoutSeconds: 1, disabled: true });
  s.agent.stdout(READY);
  for (let i = 0; i < 100; i++) s.tick();
  assert.deepEqual(s.stopped, []);
});

test('an agent whose engine never becomes ready is stopped after the start timeout', () => {
  const s = setup({ idleTimeoutSeconds: 1 });
  for (let elapsed = 0; elapsed < START_TIMEOUT_MS - 30_000; elapsed += 30_000) s.tick();
  assert.deepEqual(s.stopped, []);
  s.tick();
  assert.deepEqual(s.stopped, ['agent: the engine did not become ready in time']);
});

test('an exited record is forgotten after the retention, and stop() cancels the ticks', () => {
  const s = setup({ idleTimeoutSeconds: 1 });
  s.agent.exit('agent: stopped by DELETE /agents/:id');
  for (let i = 0; i < 9; i++) s.tick();
  assert.deepEqual(s.forgotten, []);
  s.tick();
  assert.deepEqual(s.forgotten, ['agent-1']);
  s.watchdog.stop();
  assert.equal(s.running(), false);
});

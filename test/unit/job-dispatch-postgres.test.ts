// The shared job queue on a real PostgreSQL (issue 26): claims with FOR UPDATE SKIP LOCKED by concurrent
// claimers (each job claimed once, oldest first), a job started only by its claimer, hand-back and pinning,
// the LISTEN/NOTIFY wake-ups (also after their connection is killed), and a lost node's work taken over exactly
// once while two nodes handle it at the same moment.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import pino from 'pino';
import { NodeRegistry } from '../../src/core/cluster/node-registry.js';
import { NodeLossWatcher } from '../../src/core/cluster/node-loss.js';
import { trace } from '@opentelemetry/api';
import { ContainerSlots, RunSlot } from '../../src/core/containers/container-slots.js';
import { RunPhases } from '../../src/core/run-phases.js';
import type { RunPlan } from '../../src/core/run-plan.js';
import type { RunRequest } from '../../src/core/run-request.js';
import type { RunOutcome } from '../../src/core/runs/run-executor.js';
import type { AcceptedRun } from '../../src/core/runs/run-service.js';
import { JobService, type JobRunner } from '../../src/core/jobs/job-service.js';
import type { DeliveryResult, WebhookDelivery, WebhookSender } from '../../src/core/webhooks/deliverer.js';
import { PostgresAgentStore } from '../../src/store/agents/postgres-agent-store.js';
import type { JobPlacement, JobWakeup } from '../../src/store/jobs/job-store.js';
import { PostgresJobStore } from '../../src/store/jobs/postgres-job-store.js';
import { PostgresJobWakeups } from '../../src/store/jobs/postgres-job-wakeups.js';
import { PostgresNodeStore } from '../../src/store/nodes/postgres-node-store.js';
import { PostgresDatabase } from '../../src/store/postgres/database.js';
import { agentRecord } from '../support/agent-store-contract.js';
import { newJob } from '../support/job-store-contract.js';

const T0 = '2026-01-01T00:00:00.000Z';
import { startPostgres, type PostgresDatabaseAddress, type TestPostgres } from '../support/postgres.js';
import { waitFor } from '../support/wait.js';

const T1 = '2026-01-01T00:00:01.000Z';
const log = pino({ level: 'silent' });
let server: TestPostgres;
const opened: PostgresDatabase[] = [];

function connect(address: PostgresDatabaseAddress): PostgresDatabase {
  const database = new PostgresDatabase({ connection: address.config, maxConnections: 12 });
  opened.push(database);
  return database;
}

before(async () => {
  server = await startPostgres();
});

after(async () => {
  try {
    for (const database of opened) await database.close();
  } finally {
    await server.stop();
  }
  assert.deepEqual(await server.leftovers(), []);
});

/** Two nodes' job stores, each on its own pool of one fresh database. */
async function twoQueues() {
  const address = await server.createDatabase('dispatch');
  const [a, b] = await Promise.all([PostgresJobStore.open(connect(address), 'node-a'), PostgresJobStore.open(connect(address), 'node-b')]);
  return { address, a, b };
}

describe('the shared job queue on PostgreSQL', () => {
  it('two claimers claiming at once take every job exactly once, each in submission order', async () => {
    const { a, b } = await twoQueues();
    const total = 60;
    for (let n = 1; n <= total; n += 1) await a.insert(newJob(n));
    const claimedBy = new Map<string, string[]>();
    const claimer = async (queue: PostgresJobStore) => {
      const mine: number[] = [];
      for (;;) {
        const batch = await queue.claim(3);
        if (batch.length === 0) return mine;
        for (const { job } of batch) {
          claimedBy.set(job.id, [...(claimedBy.get(job.id) ?? []), queue.node]);
          mine.push(Number(job.id.slice('job-'.length)));
        }
      }
    };
    // Four claimers per node, all at once.
    const taken = await Promise.all([a, a, a, a, b, b, b, b].map(claimer));
    const twice = [...claimedBy].filter(([, nodes]) => nodes.length > 1);
    assert.deepEqual(twice, [], 'no job claimed twice');
    assert.equal(claimedBy.size, total, 'every job claimed');
    for (const mine of taken) assert.deepEqual(mine, [...mine].sort((x, y) => x - y), 'each claimer takes the oldest first');
    assert.ok(taken.slice(0, 4).flat().length > 0 && taken.slice(4).flat().length > 0, 'both nodes took jobs');
  });

  it('a claimed job is started only by its claimer; a job handed back is claimable again, pinned ones by their accepting node only', async () => {
    const { a, b } = await twoQueues();
    await a.insert(newJob(1));
    const [claimed] = await b.claim(5);
    assert.equal(claimed?.job.id, 'job-1');
    assert.equal(claimed.acceptedBy, 'node-a');
    assert.ok(claimed.waitedMs >= 0);
    assert.deepEqual(await a.claim(5), [], 'a claimed job is not claimable');
    assert.equal(await a.transition('job-1', ['pending'], { status: 'running' }, T1), undefined, 'another node cannot start it');
    assert.deepEqual(await a.placements(['job-1']), new Map([['job-1', { status: 'pending', claimedBy: 'node-b' }]]));
    assert.equal(await b.unclaim('job-1', { pin: true }), true, 'handed back, for its accepting node only');
    assert.deepEqual(await b.claim(5), [], 'pinned to node A');
    const [again] = await a.claim(5);
    assert.equal(again?.job.id, 'job-1');
    assert.equal((await a.transition('job-1', ['pending'], { status: 'running' }, T1))?.status, 'running', 'its claimer starts it');
    assert.equal(await a.unclaim('job-1'), false, 'a started job is never handed back');
    assert.deepEqual((await a.withStatus('running')).map((job) => job.id), ['job-1']);
    assert.deepEqual(await b.withStatus('running'), []);

    await b.insert(newJob(2, { claimed: true }));
    assert.deepEqual(await a.claim(5), [], 'a job claimed at submission by its accepting node is not in the queue');
    await b.insert(newJob(3, { pinned: true }));
    assert.deepEqual(await a.claim(5), [], 'nor is one pinned to another node');
    assert.equal(await b.unclaimAll(), 1, 'a stop hands back what the node claimed and did not start');
    assert.deepEqual((await b.claim(5)).map((c) => c.job.id), ['job-2', 'job-3']);
  });

  it('an attempt on another node than the last one that may have made its container runs under a new run id (no container-name collision)', async () => {
    const { address, a, b } = await twoQueues();
    const runIdOf = async (id: string) => (await a.get(id))!.runId;
    const uuidRunId = /^run-[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
    // Claimed by its accepting node (which may hold a pooled engine named after it): the accepted run id.
    await a.insert(newJob(1));
    assert.equal((await a.claim(1))[0]?.job.runId, 'run-1');
    assert.equal(await runIdOf('job-1'), 'run-1');
    // Claimed by another node: a run id of its own, in the claim and in the record (reattach finds it by it).
    await a.insert(newJob(2));
    const [claimedByB] = await b.claim(1);
    assert.match(claimedByB!.job.runId, uuidRunId);
    assert.equal(await runIdOf('job-2'), claimedByB!.job.runId);
    // A node lost with a job it claimed and never started (its pooled engine may be there, named after the
    // run): the job goes back to the queue under a new run id, and whoever claims it next, even its accepting
    // node, never meets that name.
    const c = await PostgresJobStore.open(connect(address), 'node-c');
    await c.insert(newJob(3, { claimed: true }));
    await a.lostNodeJobs('node-c');
    const requeued = await runIdOf('job-3');
    assert.match(requeued, uuidRunId);
    assert.deepEqual(await a.placements(['job-3']), new Map([['job-3', { status: 'pending', claimedBy: null }]]));
    // A node whose previous process ended hands back what it had claimed, under new run ids too.
    const d = await PostgresJobStore.open(connect(address), 'node-d');
    await d.insert(newJob(4, { claimed: true }));
    assert.equal(await d.unclaimAll(), 1);
    const handedBack = await runIdOf('job-4');
    assert.match(handedBack, uuidRunId);
    const ids = [claimedByB!.job.runId, requeued, handedBack];
    assert.equal(new Set(ids).size, 3, 'every new run id is its own');
  });

  it('wakes the listening nodes at each claimable job, and listens again after its connection is killed', async () => {
    const { address, a } = await twoQueues();
    const database = connect(address);
    const woken: JobWakeup[] = [];
    const errors: Error[] = [];
    const wakeups = new PostgresJobWakeups(database, (error) => errors.push(error));
    wakeups.start((wakeup) => woken.push(wakeup));
    try {
      await waitFor('the first LISTEN', async () => woken.length >= 1 || undefined, 5_000, 20);
      woken.length = 0;
      await a.insert(newJob(1));
      await waitFor('the wake-up of an insert', async () => woken.some((w) => w.kind === 'pending') || undefined, 5_000, 10);
      const [claimed] = await a.claim(1);
      await a.transition(claimed!.job.id, ['pending'], { status: 'cancelled' }, T1);
      await waitFor('the change announced to the claimer', async () => woken.some((w) => w.kind === 'changed' && w.nodes.includes('node-a')) || undefined, 5_000, 10);

      const admin = connect(address);
      const [killed] = await admin.query<{ n: number }>(
        `SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity WHERE query = 'LISTEN berth_jobs' AND pid <> pg_backend_pid()`,
      );
      assert.equal(killed?.n, 1, 'the listening connection was found and ended');
      await waitFor('the failure reported', async () => errors.length >= 1 || undefined, 5_000, 20);
      woken.length = 0;
      await waitFor('listening again', async () => woken.length >= 1 || undefined, 10_000, 20);
      woken.length = 0;
      await a.insert(newJob(2));
      await waitFor('the wake-up of an insert after the reconnection', async () => woken.some((w) => w.kind === 'pending') || undefined, 5_000, 10);
    } finally {
      await wakeups.stop();
    }
  });

  it('a lost node\'s work is taken over exactly once while two nodes handle it at the same moment', async () => {
    const address = await server.createDatabase('loss');
    const dbX = connect(address);
    const nodesX = await PostgresNodeStore.open(dbX);
    const jobsX = await PostgresJobStore.open(dbX, 'node-x');
    const agentsX = await PostgresAgentStore.open(dbX, 'node-x');
    // Node X: registered with a short lease that it never renews (lost), with work in every state.
    const claimX = await nodesX.claim({ name: 'node-x', dataId: 'dir-x', url: 'http://x', version: 't' }, 'holder-x', 300);
    assert.equal(claimX.claimed, true);
    const hook = (n: number) => ({ webhookUrl: `https://hooks.example/${n}` });
    for (const n of [1, 2]) await jobsX.insert(newJob(n, hook(n)));
    await jobsX.insert(newJob(3, hook(3))); // claimed, never started
    await jobsX.insert(newJob(5, hook(5))); // finished by X, its webhook owed
    assert.deepEqual((await jobsX.claim(4)).map((c) => c.job.id), ['job-1', 'job-2', 'job-3', 'job-5']);
    await jobsX.insert(newJob(4, { ...hook(4), pinned: true })); // only X could run it
    await jobsX.insert(newJob(6)); // anyone's, unclaimed: stays pending
    for (const id of ['job-1', 'job-2', 'job-5']) await jobsX.transition(id, ['pending'], { status: 'running' }, T1);
    await jobsX.transition('job-5', ['running'], { status: 'completed', output: 'done' }, T1);
    for (const n of [1, 2]) await agentsX.insert(agentRecord(n, { status: 'idle' }));
    await agentsX.insert(agentRecord(3, { status: 'exited', exitError: 'idle timeout', exitedAt: T0 }));

    const delivered: string[] = [];
    const sender: WebhookSender = {
      async deliver(delivery: WebhookDelivery): Promise<DeliveryResult> {
        delivered.push(`${delivery.url} ${(JSON.parse(delivery.body) as { crash_info: { reason: string } | null }).crash_info?.reason ?? 'none'}`);
        return { outcome: 'delivered', attempts: 1, status: 200 };
      },
    };
    const handler = async (name: string) => {
      const database = connect(address);
      const queue = await PostgresJobStore.open(database, name);
      const jobs = new JobService({
        store: queue, runs: {} as JobRunner, webhooks: sender, maxConcurrentRuns: 2, retentionMs: 3_600_000, log,
        shared: { queue, wakeups: { start: () => undefined, stop: async () => undefined } },
      });
      const registry = await NodeRegistry.register(await PostgresNodeStore.open(database), { name, dataId: `dir-${name}`, url: `http://${name}`, version: 't' }, { leaseMs: 60_000, onHeartbeatError: () => undefined });
      const agents = await PostgresAgentStore.open(database, name);
      const moved: string[] = [];
      const watcher = new NodeLossWatcher({
        registry, leaseMs: 60_000, log,
        handlers: { jobs, agents: { markNodeLost: async (...args) => { const ids = await agents.markNodeLost(...args); moved.push(...ids); return ids; } } },
      });
      return { jobs, registry, watcher, moved };
    };
    const [h1, h2] = await Promise.all([handler('node-h1'), handler('node-h2')]);
    await new Promise((resolve) => setTimeout(resolve, 400));
    assert.deepEqual((await h1.registry.expiredNodes()).map((node) => node.name), ['node-x']);
    await Promise.all([h1.watcher.check(), h2.watcher.check(), h1.watcher.check(), h2.watcher.check()]);
    await waitFor('the webhooks sent', async () => delivered.length >= 4 || undefined, 5_000, 20);
    await new Promise((resolve) => setTimeout(resolve, 200));

    assert.deepEqual(delivered.sort(), [
      'https://hooks.example/1 node_lost',
      'https://hooks.example/2 node_lost',
      'https://hooks.example/4 node_lost',
      'https://hooks.example/5 none',
    ], 'each webhook once: the running and stranded jobs crashed node_lost, the owed one taken over');
    for (const id of ['job-1', 'job-2', 'job-4']) {
      const job = await jobsX.get(id);
      assert.equal(job?.status, 'crashed', id);
      assert.equal(job?.crashInfo?.reason, 'node_lost', id);
    }
    assert.deepEqual(await jobsX.placements(['job-3', 'job-6']), new Map([
      ['job-3', { status: 'pending', claimedBy: null }],
      ['job-6', { status: 'pending', claimedBy: null }],
    ]), 'never-started jobs are claimable again');
    assert.deepEqual([...h1.moved, ...h2.moved].sort(), ['agent-1', 'agent-2'], 'each live agent exited once');
    const agents = await agentsX.exited();
    assert.deepEqual(agents.map((agent) => [agent.id, agent.exitError?.split(':')[0]]), [['agent-1', 'node_lost'], ['agent-2', 'node_lost'], ['agent-3', 'idle timeout']]);
    await agentsX.update('agent-1', { ...agents[0]!, status: 'idle', exitedAt: null, exitError: null });
    assert.equal((await agentsX.exited()).length, 3, 'the lost node\'s late write does not bring an agent back');
    assert.deepEqual(await h1.registry.expiredNodes(), [], 'the loss is recorded as handled');
    assert.equal(await nodesX.heartbeat('node-x', 'holder-x', 300), null, 'the lost process cannot renew its lease');
    const restarted = await nodesX.claim({ name: 'node-x', dataId: 'dir-x', url: 'http://x', version: 't' }, 'holder-x2', 60_000);
    assert.equal(restarted.claimed, true, 'a restart takes the name back');
    assert.deepEqual(await jobsX.withStatus('running'), [], 'and finds no job running under it (their containers are removed as leftovers)');
    assert.deepEqual(await agentsX.live(), [], 'nor any live agent');
    await Promise.all([h1.registry.deregister(), h2.registry.deregister()]);
  });

  it('a job this node claims while it checks its jobs against the queue is not taken for lost (reconcile sees what ran when it asked)', async () => {
    const address = await server.createDatabase('reconcile');
    const queue = await PostgresJobStore.open(connect(address), 'node-a');
    // Runs that end when the test says, or crash when aborted (as the executor does).
    const slots = new ContainerSlots({ total: 100, perCaller: 100 });
    const started = new Map<string, { signal: AbortSignal; finish: () => void }>();
    let counter = 0;
    const accept = async (request: RunRequest, runId?: string, sessionId?: string): Promise<AcceptedRun> => {
      counter += 1;
      const id = sessionId ?? `00000000-0000-4000-8000-${String(counter).padStart(12, '0')}`;
      const session = { sessionId: id, engineSession: { kind: 'new', sessionId: id }, mountPath: '/nowhere', persistent: true, release: async () => undefined } as AcceptedRun['session'];
      const plan = { prompt: request.prompt, webhookUrl: undefined, session: { kind: 'new' }, workspace: { kind: 'none' }, container: { volumes: [], secretsEnv: [] } } as unknown as RunPlan;
      return { runId: runId ?? `run-${counter}`, plan, session, phases: new RunPhases(), slot: new RunSlot(slots, ''), span: trace.getTracer('test').startSpan('run'), engineBinary: '/e' };
    };
    const runs = {
      accept: (request: RunRequest) => accept(request),
      acceptAgain: (run: { runId: string; sessionId: string; request: RunRequest }) => accept(run.request, run.runId, run.sessionId),
      reattach: async () => undefined,
      abandon: async () => undefined,
      execute: (accepted: AcceptedRun, _mode: unknown, signal: AbortSignal) =>
        new Promise<RunOutcome>((resolve) => {
          signal.addEventListener('abort', () => resolve({ kind: 'crashed', reason: 'cancelled', exitCode: 137, signal: 'SIGKILL', partialOutput: '', taskCompleted: false }), { once: true });
          started.set(accepted.plan.prompt, { signal, finish: () => resolve({ kind: 'failed', message: 'done', envelope: undefined } as unknown as RunOutcome) });
        }),
      toResult: async () => { throw new Error('unused'); },
      crashError: () => { throw new Error('unused'); },
      budgetError: () => undefined,
    } as unknown as JobRunner;
    // The placements are answered when the test lets them: read before this node's claim, answered after it.
    let gate: { release(): void; asked: Promise<void> } | undefined;
    const gated = Object.create(queue, {
      placements: {
        value: async (ids: readonly string[]): Promise<Map<string, JobPlacement>> => {
          const read = await queue.placements(ids);
          if (gate) await new Promise<void>((resolve) => (gate!.release = resolve));
          return read;
        },
      },
    }) as PostgresJobStore;
    let wake!: (wakeup: JobWakeup) => void;
    const jobs = new JobService({
      store: queue, runs, maxConcurrentRuns: 1, retentionMs: 3_600_000, log,
      shared: { queue: gated, wakeups: { start: (on) => (wake = on), stop: async () => undefined }, pollMs: 60_000 },
    });
    await jobs.start();
    // The start's claim pass counts every free slot while it asks: a submission meanwhile is left to the queue.
    await new Promise((resolve) => setTimeout(resolve, 200));
    const caller = { owner: 'client-a' } as Parameters<JobService['submit']>[1];
    const first = await jobs.submit({ prompt: 'first' } as RunRequest, caller);
    await waitFor('the first run', async () => started.has('first') || undefined, 5_000, 5).catch(async (error: unknown) => {
      throw new Error(`${(error as Error).message}: ${JSON.stringify(await queue.get(first.job_id))} ${JSON.stringify(await queue.placements([first.job_id]))}`);
    });
    const second = await jobs.submit({ prompt: 'second' } as RunRequest, caller);
    assert.deepEqual((await queue.placements([second.job_id])).get(second.job_id), { status: 'pending', claimedBy: null }, 'no slot: it waits in the queue, held here');

    gate = { release: () => undefined, asked: Promise.resolve() };
    wake({ kind: 'changed', nodes: ['node-a'] });
    await new Promise((resolve) => setTimeout(resolve, 100)); // placements read: the second job pending, unclaimed
    started.get('first')!.finish();
    await waitFor('the second run, claimed by this node', async () => started.has('second') || undefined, 5_000, 5);
    gate.release();
    gate = undefined;
    await new Promise((resolve) => setTimeout(resolve, 100));
    assert.equal(started.get('second')!.signal.aborted, false, 'the stale placement did not abort it');
    started.get('second')!.finish();
    await waitFor('the second job to end', async () => (await queue.get(second.job_id))?.status === 'failed' || undefined, 5_000, 10);
    assert.equal((await queue.get(first.job_id))?.status, 'failed');
    await jobs.close();
  });
  it('a job resuming a session waits for any node when sessions move (SERVICE_SHARED_DIR), its session let go of before it is queued', async () => {
    for (const sessionsMove of [true, false]) {
      const address = await server.createDatabase(sessionsMove ? 'unpinned' : 'pinned');
      const queue = await PostgresJobStore.open(connect(address), 'node-a');
      const other = await PostgresJobStore.open(connect(address), 'node-b');
      const slots = new ContainerSlots({ total: 100, perCaller: 100 });
      const steps: string[] = [];
      let counter = 0;
      const accept = async (request: RunRequest): Promise<AcceptedRun> => {
        counter += 1;
        const id = `00000000-0000-4000-8000-${String(counter).padStart(12, '0')}`;
        const kind = request.prompt === 'resume' ? 'resume' : 'new';
        const session = { sessionId: id, engineSession: { kind, sessionId: id }, mountPath: '/nowhere', persistent: true, release: async () => undefined } as AcceptedRun['session'];
        const plan = { prompt: request.prompt, webhookUrl: undefined, session: kind === 'resume' ? { kind, sessionId: id } : { kind }, workspace: { kind: 'none' }, container: { volumes: [], secretsEnv: [] } } as unknown as RunPlan;
        return { runId: `run-${counter}`, plan, session, phases: new RunPhases(), slot: new RunSlot(slots, ''), span: trace.getTracer('test').startSpan('run'), engineBinary: '/e' };
      };
      const runs = {
        accept: (request: RunRequest) => accept(request),
        acceptAgain: (run: { request: RunRequest }) => accept(run.request),
        reattach: async () => undefined,
        abandon: async (accepted: AcceptedRun) => void steps.push(`let go of ${accepted.plan.prompt}`),
        // The first job holds node A's one slot until the test ends.
        execute: (_accepted: AcceptedRun, _mode: unknown, signal: AbortSignal) =>
          new Promise<RunOutcome>((resolve) => signal.addEventListener('abort', () => resolve({ kind: 'crashed', reason: 'cancelled', exitCode: 137, signal: 'SIGKILL', partialOutput: '', taskCompleted: false }), { once: true })),
      } as unknown as JobRunner;
      const recorded = Object.create(queue, {
        insert: { value: async (job: Parameters<PostgresJobStore['insert']>[0]) => { steps.push(`queued ${String((job.request as RunRequest).prompt)}`); return queue.insert(job); } },
      }) as PostgresJobStore;
      const jobs = new JobService({
        store: recorded, runs, maxConcurrentRuns: 1, retentionMs: 3_600_000, log,
        shared: { queue, wakeups: { start: () => undefined, stop: async () => undefined }, pollMs: 60_000, sessionsMove },
      });
      await jobs.start();
      await new Promise((resolve) => setTimeout(resolve, 200));
      const caller = { owner: 'client-a' } as Parameters<JobService['submit']>[1];
      const busy = await jobs.submit({ prompt: 'busy' } as RunRequest, caller);
      await waitFor('the first job running', async () => (await queue.get(busy.job_id))?.status === 'running' || undefined, 5_000, 10);
      const resumed = await jobs.submit({ prompt: 'resume' } as RunRequest, caller);
      const claimedByB = await other.claim(5);
      if (sessionsMove) {
        assert.deepEqual(steps, ['queued busy', 'let go of resume', 'queued resume'], 'the session let go of before the job is in the queue');
        assert.deepEqual(claimedByB.map((c) => c.job.id), [resumed.job_id], 'another node claims it');
      } else {
        assert.deepEqual(steps, ['queued busy', 'queued resume'], 'held here');
        assert.deepEqual(claimedByB, [], 'pinned to its accepting node: the session\'s workspace is on its disk');
      }
      await jobs.close();
    }
  });
});

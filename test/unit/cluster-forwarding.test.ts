// Where a request for an agent or a job goes on a node of a cluster (src/core/cluster/forwarding.ts): to the
// node that runs it when that node holds a live lease, answered here otherwise (unknown, another caller's, this
// node's own), answered from the record for an agent whose node holds no lease; a job only while another node
// has claimed it (an unclaimed or finished one is all in the store).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ClusterForwarding, snapshotOfRecord } from '../../src/core/cluster/forwarding.js';
import type { AgentPlacement, JobPlacement, PlacementStore } from '../../src/store/placement/postgres-placement-store.js';

const live = { name: 'node-b', url: 'http://b.internal:8080', live: true };
const lapsed = { name: 'node-c', url: 'http://c.internal:8080', live: false };

function agent(id: string, nodeName: string, node: AgentPlacement['node'], extra: Partial<AgentPlacement> = {}): AgentPlacement {
  return {
    id, owner: 'alice', sessionId: '3f0c2a9e-6a1b-4c1d-9f7e-2b8d4c6a1e55', status: 'idle', createdAt: '2030-01-01T00:00:00.000Z',
    lastActivityAt: '2030-01-01T00:00:01.000Z', idleTimeoutSeconds: 1800, idleTimeoutDisabled: false, turnsCompleted: 2, exitError: null,
    node, nodeName, ...extra,
  };
}

function placement(agents: AgentPlacement[], jobs: JobPlacement[]): PlacementStore {
  return {
    agent: async (id) => agents.find((a) => a.id === id),
    agentsOf: async (owner) => agents.filter((a) => a.owner === owner),
    job: async (id) => jobs.find((j) => j.id === id),
    forgetExitedAgent: async () => false,
    close: async () => undefined,
  };
}

const alice = { owner: 'alice' };
const agents = [
  agent('agent-b', 'node-b', live),
  agent('agent-here', 'node-a', { name: 'node-a', url: 'http://a.internal:8080', live: true }),
  agent('agent-c', 'node-c', lapsed, { status: 'exited', exitError: 'agent: its node was lost (node_lost)' }),
  agent('agent-nowhere', 'node-x', undefined),
];
const jobs: JobPlacement[] = [
  { id: 'job-running-b', owner: 'alice', status: 'running', claimed: true, node: live },
  { id: 'job-claimed-b', owner: 'alice', status: 'pending', claimed: true, node: live },
  { id: 'job-pending-b', owner: 'alice', status: 'pending', claimed: false, node: live },
  { id: 'job-done-b', owner: 'alice', status: 'completed', claimed: true, node: live },
  { id: 'job-running-c', owner: 'alice', status: 'running', claimed: true, node: lapsed },
];
const forwarding = new ClusterForwarding(placement(agents, jobs), 'node-a');

test('an agent of a live node is forwarded there; unknown, another caller\'s or this node\'s own are answered here', async () => {
  assert.deepEqual(await forwarding.agent('agent-b', alice), { kind: 'owner', node: 'node-b', url: 'http://b.internal:8080' });
  assert.deepEqual(await forwarding.agent('agent-b', { owner: 'bob' }), { kind: 'here' });
  assert.deepEqual(await forwarding.agent('agent-unknown', alice), { kind: 'here' });
  assert.deepEqual(await forwarding.agent('agent-here', alice), { kind: 'here' });
});

test('an agent whose node holds no lease (or never registered) is answered from its record', async () => {
  const c = await forwarding.agent('agent-c', alice);
  assert.equal(c.kind, 'record');
  assert.deepEqual(snapshotOfRecord(agents[2]!), {
    id: 'agent-c', session_id: '3f0c2a9e-6a1b-4c1d-9f7e-2b8d4c6a1e55', status: 'exited', created_at: '2030-01-01T00:00:00.000Z',
    last_activity_at: '2030-01-01T00:00:01.000Z', idle_timeout_seconds: 1800, turns_completed: 2, exit_error: 'agent: its node was lost (node_lost)',
  });
  assert.equal((await forwarding.agent('agent-nowhere', alice)).kind, 'record');
});

test('a job is forwarded only while another live node has claimed it (waiting for a slot there, or running)', async () => {
  assert.deepEqual(await forwarding.job('job-running-b', alice), { kind: 'owner', node: 'node-b', url: 'http://b.internal:8080' });
  assert.deepEqual(await forwarding.job('job-claimed-b', alice), { kind: 'owner', node: 'node-b', url: 'http://b.internal:8080' });
  for (const id of ['job-pending-b', 'job-done-b', 'job-running-c', 'job-unknown']) assert.deepEqual(await forwarding.job(id, alice), { kind: 'here' }, id);
  assert.deepEqual(await forwarding.job('job-running-b', { owner: 'bob' }), { kind: 'here' });
});

test('the caller\'s agents on other nodes are listed from their records, this node\'s left to its memory', async () => {
  assert.deepEqual((await forwarding.agentsElsewhere(alice)).map((a) => a.id), ['agent-b', 'agent-c', 'agent-nowhere']);
  assert.deepEqual(await forwarding.agentsElsewhere({ owner: 'bob' }), []);
});

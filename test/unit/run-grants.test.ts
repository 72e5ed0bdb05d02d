// The per-run credentials: a token is refused until bound, a revoked one is refused at once, grants of live
// runs survive a restart (a second RunGrants over the same file), the rest is revoked at start and by the sweep.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { REFUSAL_RETENTION_MS, RunGrants, SWEEP_GRACE_MS } from '../../src/core/gateway/run-grants.js';
import type { GrantHolder } from '../../src/core/gateway/gateway-types.js';
import { parseHostPattern, type HostPattern } from '../../src/egress-policy.js';
import type { GrantRow, GrantStore } from '../../src/store/gateway/grant-store.js';
import { SqliteGrantStore } from '../../src/store/gateway/sqlite-grant-store.js';

const dir = mkdtempSync(join(tmpdir(), 'berth-run-grants-'));
after(() => rmSync(dir, { recursive: true, force: true }));
let files = 0;
const newFile = () => join(dir, `grants-${(files += 1)}.db`);

const pattern = (text: string) => parseHostPattern(text) as HostPattern;
const holder = (runId: string, extra: Partial<GrantHolder> = {}): GrantHolder => ({
  kind: 'run',
  runId,
  caller: 'alice',
  sessionId: 'session-1',
  policy: { mode: 'allowlist', allow: [pattern('pypi.org'), pattern('*.npmjs.org:8443')] },
  budgetUsd: 0.5,
  ...extra,
});

function clock(start = 1_000_000) {
  let now = start;
  return { now: () => now, advance: (ms: number) => (now += ms) };
}

describe('RunGrants', () => {
  it('issues a random token of its own format, refused until bound, then the holder\'s', () => {
    const grants = new RunGrants(new SqliteGrantStore(':memory:'));
    const token = grants.issue('run-1');
    assert.match(token, /^brt_[0-9a-f]{64}$/);
    assert.notEqual(grants.issue('run-2'), token);
    assert.deepEqual(grants.lookup(token), { state: 'issued', runId: 'run-1', issuedAt: grants.lookup(token)!.issuedAt });
    grants.bind('run-1', holder('run-1'));
    const grant = grants.lookup(token);
    assert.equal(grant?.state, 'bound');
    assert.equal(grant?.state === 'bound' && grant.holder.caller, 'alice');
  });

  it('refuses a token at once once revoked, and what only looks like one', () => {
    const grants = new RunGrants(new SqliteGrantStore(':memory:'));
    const token = grants.issue('run-1');
    grants.bind('run-1', holder('run-1'));
    grants.revoke('run-1');
    assert.equal(grants.lookup(token), undefined);
    assert.equal(grants.has('run-1'), false);
    assert.equal(grants.lookup(''), undefined);
    assert.equal(grants.lookup(`${token}x`), undefined);
    assert.equal(grants.lookup(token.toUpperCase()), undefined);
    assert.throws(() => grants.bind('run-1', holder('run-1')), /no credential to bind/);
  });

  it('a second issue for the same run replaces the first token', () => {
    const grants = new RunGrants(new SqliteGrantStore(':memory:'));
    const first = grants.issue('run-1');
    const second = grants.issue('run-1');
    assert.equal(grants.lookup(first), undefined);
    assert.equal(grants.lookup(second)?.runId, 'run-1');
  });

  it('refuses to bind a grant to another run', () => {
    const grants = new RunGrants(new SqliteGrantStore(':memory:'));
    grants.issue('run-1');
    assert.throws(() => grants.bind('run-1', holder('run-2')), /cannot be bound to run run-2/);
  });

  it('keeps only digests in its file: a token is nowhere in it', async () => {
    const file = newFile();
    const store = new SqliteGrantStore(file);
    const grants = new RunGrants(store);
    const token = grants.issue('run-1');
    grants.bind('run-1', holder('run-1'));
    await grants.flush();
    await store.close();
    for (const name of [file, `${file}-wal`]) {
      const bytes = (() => {
        try {
          return readFileSync(name);
        } catch {
          return Buffer.alloc(0);
        }
      })();
      assert.equal(bytes.includes(token), false, `${name} holds the token`);
      assert.equal(bytes.includes(token.slice(4)), false, `${name} holds the token's hex`);
    }
  });

  it('grants survive a restart with their holder (policy parsed again); retainOnly revokes the runs that are not live', async () => {
    const file = newFile();
    const first = new SqliteGrantStore(file);
    const before = new RunGrants(first);
    const job = before.issue('run-job');
    before.bind('run-job', holder('run-job'));
    const agent = before.issue('agent-1');
    before.bind('agent-1', holder('agent-1', { kind: 'agent', agentId: 'agent-1', policy: { mode: 'open' } }));
    const gone = before.issue('run-sync');
    const pooled = before.issue('run-pooled');
    await before.flush();
    await first.close();

    const store = new SqliteGrantStore(file);
    const grants = await RunGrants.open(store);
    assert.deepEqual(grants.runIds().sort(), ['agent-1', 'run-job', 'run-pooled', 'run-sync']);
    assert.equal(grants.retainOnly(['run-job', 'agent-1', 'run-unknown']), 2);
    assert.equal(grants.lookup(gone), undefined);
    assert.equal(grants.lookup(pooled), undefined);
    const restored = grants.lookup(job);
    assert.equal(restored?.state, 'bound');
    assert.deepEqual(restored?.state === 'bound' && restored.holder, holder('run-job'));
    const agentGrant = grants.lookup(agent);
    assert.deepEqual(agentGrant?.state === 'bound' && agentGrant.holder.policy, { mode: 'open' });
    await grants.flush();
    await store.close();
    // What retainOnly revoked is gone from the file too.
    const again = new SqliteGrantStore(file);
    assert.deepEqual((await RunGrants.open(again)).runIds().sort(), ['agent-1', 'run-job']);
    await again.close();
  });

  it('drops a kept grant whose holder cannot be read', async () => {
    const store = new SqliteGrantStore(':memory:');
    await store.put({ tokenSha256: 'a'.repeat(64), runId: 'run-bad', issuedAt: 1, holder: '{"kind":"run","runId":"run-bad","caller":"x","policy":{"mode":"allowlist","allow":["*"]}}' });
    await store.put({ tokenSha256: 'b'.repeat(64), runId: 'run-junk', issuedAt: 1, holder: 'not json' });
    const logged: unknown[] = [];
    const grants = await RunGrants.open(store, { log: (details) => logged.push(details) });
    assert.deepEqual(grants.runIds(), []);
    assert.equal(logged.length, 2);
    await grants.flush();
    assert.deepEqual(await store.all(), []);
  });

  it('sweeps grants whose container is gone, but not those just issued', () => {
    const time = clock();
    const grants = new RunGrants(new SqliteGrantStore(':memory:'), { now: time.now });
    grants.issue('run-old-gone');
    grants.issue('run-old-there');
    time.advance(SWEEP_GRACE_MS + 1);
    grants.issue('run-new');
    assert.equal(grants.sweep(['run-old-there']), 1);
    assert.deepEqual(grants.runIds().sort(), ['run-new', 'run-old-there']);
  });

  it('a budget refusal stays readable while the grant lives and for a while after it is revoked', () => {
    const time = clock();
    const grants = new RunGrants(new SqliteGrantStore(':memory:'), { now: time.now });
    grants.issue('run-1');
    assert.equal(grants.refusalOf('run-1'), undefined);
    grants.noteRefusal('run-1', "this run's max_budget_usd (0.01 USD) is spent");
    assert.deepEqual(grants.refusalOf('run-1'), { message: "this run's max_budget_usd (0.01 USD) is spent", at: time.now() });
    time.advance(REFUSAL_RETENTION_MS * 3);
    assert.ok(grants.refusalOf('run-1'), 'kept while the grant lives');
    grants.revoke('run-1');
    time.advance(REFUSAL_RETENTION_MS - 1);
    assert.ok(grants.refusalOf('run-1'));
    time.advance(2);
    assert.equal(grants.refusalOf('run-1'), undefined);
    // Noted after the revoke (a request in flight): kept for the retention too.
    grants.noteRefusal('run-2', 'late');
    time.advance(REFUSAL_RETENTION_MS + 1);
    assert.equal(grants.refusalOf('run-2'), undefined);
  });
});

describe('RunGrants.detach', () => {
  it('a detaching stop keeps every grant in the store, though this process revokes them in memory', async () => {
    const file = newFile();
    const store = new SqliteGrantStore(file);
    const grants = new RunGrants(store);
    const token = grants.issue('run-job');
    grants.bind('run-job', holder('run-job'));
    grants.detach();
    grants.revoke('run-job');
    assert.equal(grants.lookup(token), undefined);
    await grants.flush();
    await store.close();
    const again = new SqliteGrantStore(file);
    const restarted = await RunGrants.open(again);
    assert.equal(restarted.retainOnly(['run-job']), 0);
    assert.equal(restarted.lookup(token)?.state, 'bound');
    await again.close();
  });
});

/** A store that answers each write after the delay the test gives it, recording the order writes land in. */
class SlowStore implements GrantStore {
  readonly rows = new Map<string, GrantRow>();
  readonly landed: string[] = [];
  failing = false;
  constructor(private readonly delays: number[]) {}
  private async land(what: string, change: () => void): Promise<void> {
    const delay = this.delays.shift() ?? 0;
    // Infinity: a store that never answers (a database that hangs).
    await new Promise((resolve) => (delay === Infinity ? undefined : setTimeout(resolve, delay)));
    if (this.failing) throw new Error('connection terminated');
    this.landed.push(what);
    change();
  }
  async all(): Promise<GrantRow[]> {
    return [...this.rows.values()];
  }
  put(row: GrantRow): Promise<void> {
    return this.land(`put ${row.runId}`, () => this.rows.set(row.runId, row));
  }
  setHolder(runId: string, holder: string | null): Promise<void> {
    return this.land(`bind ${runId}`, () => {
      const row = this.rows.get(runId);
      if (row) this.rows.set(runId, { ...row, holder });
    });
  }
  remove(runId: string): Promise<void> {
    return this.land(`remove ${runId}`, () => this.rows.delete(runId));
  }
  async close(): Promise<void> {}
}

describe('RunGrants over a store that answers later (PostgreSQL)', () => {
  it('answers lookups from memory at once, while the store has not answered a write yet', () => {
    const grants = new RunGrants(new SlowStore([Infinity, Infinity, Infinity]));
    const token = grants.issue('run-1');
    grants.bind('run-1', holder('run-1'));
    assert.equal(grants.lookup(token)?.state, 'bound');
    grants.revoke('run-1');
    assert.equal(grants.lookup(token), undefined);
  });

  it('writes each run\'s changes in the order they were made, whatever order the store answers in', async () => {
    // The first write of each run is the slowest: without a queue per run, a later write would land first.
    const store = new SlowStore([40, 1, 1, 30, 1, 1, 1]);
    const grants = new RunGrants(store);
    grants.issue('run-1');
    grants.bind('run-1', holder('run-1'));
    grants.revoke('run-1');
    const second = grants.issue('run-2');
    grants.bind('run-2', holder('run-2'));
    grants.issue('run-3');
    await grants.flush();
    assert.deepEqual(store.landed.filter((what) => what.endsWith('run-1')), ['put run-1', 'bind run-1', 'remove run-1']);
    assert.deepEqual(store.landed.filter((what) => what.endsWith('run-2')), ['put run-2', 'bind run-2']);
    assert.deepEqual([...store.rows.keys()].sort(), ['run-2', 'run-3']);
    assert.equal(store.rows.get('run-2')?.holder !== null, true);
    // What the store now holds is what a restart finds: the same grants as this process.
    const restarted = await RunGrants.open(store);
    assert.deepEqual(restarted.runIds().sort(), grants.runIds().sort());
    assert.equal(restarted.lookup(second)?.state, 'bound');
  });

  it('logs a write the store refused and goes on with its memory; never throws at the run', async () => {
    const store = new SlowStore([]);
    store.failing = true;
    const logged: string[] = [];
    const grants = new RunGrants(store, { log: (_details, message) => logged.push(message) });
    const token = grants.issue('run-1');
    grants.bind('run-1', holder('run-1'));
    await grants.flush();
    assert.equal(grants.lookup(token)?.state, 'bound');
    assert.equal(logged.length, 2);
    assert.match(logged[0]!, /storing an issued grant failed/);
    grants.revoke('run-1');
    await grants.flush();
    assert.equal(grants.lookup(token), undefined);
    assert.match(logged[2]!, /removing a revoked grant failed/);
  });
});

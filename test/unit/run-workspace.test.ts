// Which workspace a run works in, and that it is given back (bind, lease, session, in that order) on release:
// core/runs/run-workspace.ts against a fake workspaces service and a fake binder.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import pino from 'pino';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BerthError, errors } from '../../src/errors.js';
import { RunWorkspaces, type RunWorkspacePort } from '../../src/core/runs/run-workspace.js';
import type { WorkdirBinder } from '../../src/runtime/workdir-binds.js';
import type { PreparedSession } from '../../src/core/sessions/session-store.js';
import type { EngineSession } from '../../src/engine/command.js';
import { workspaceIntent } from '../../src/core/validation/workspace.js';
import { refused } from './support/refused.js';

const OWNER = 'alice';
const GIVEN = '11111111-1111-4111-8111-111111111111';
const TARGET = '/sessions/.runs/run-1/.berth-writable/workdir';

function world(options: { busy?: boolean; links?: Record<string, { id: string; owned: boolean }>; tree?: string } = {}) {
  const events: string[] = [];
  const links = new Map(Object.entries(options.links ?? {}));
  const sessionsAlive = new Set<string>();
  let created = 0;
  const workspaces: RunWorkspacePort = {
    available: true,
    get: async (owner, id) => {
      if (owner !== OWNER) throw errors.workspaceNotFound(id);
      return {} as never;
    },
    create: async (_owner, opts) => {
      created += 1;
      events.push(`create ${opts?.ownedBySession}`);
      return { id: `own-${created}` } as never;
    },
    acquire: async (_owner, id, holder) => {
      if (options.busy) throw errors.workspaceBusy(id);
      events.push(`acquire ${id} ${holder.kind}`);
      return { id, treeHostPath: `/ws/${id}/tree`, release: async () => void events.push(`lease release ${id}`) };
    },
    holder: () => undefined,
    settleInBackground: () => undefined,
    withFiles: async (_owner, id, _mode, fn) => fn({ tree: options.tree ?? `/nonexistent/${id}/tree` } as never),
    settled: async () => undefined,
    sessionWorkspace: async (sessionId) => links.get(sessionId),
    linkSession: async (sessionId, id, owned) => {
      links.set(sessionId, { id, owned });
      events.push(`link ${sessionId} ${id} ${owned}`);
    },
    forkForSession: async (_owner, from, sessionId) => {
      events.push(`fork ${from} ${sessionId}`);
      links.set(sessionId, { id: `copy-of-${from}`, owned: true });
      return `copy-of-${from}`;
    },
    removeForSession: async (sessionId) => {
      events.push(`removeForSession ${sessionId}`);
      links.delete(sessionId);
    },
  };
  const bound = new Map<string, string>();
  const binder: WorkdirBinder = {
    bind: async (tree, target) => {
      bound.set(target, tree);
      events.push(`bind ${tree}`);
    },
    unbind: async (target) => {
      bound.delete(target);
      events.push('unbind');
    },
    boundAt: async (target) => (bound.has(target) ? bound.get(target)!.split('/')[2] : undefined),
  };
  const runWorkspaces = new RunWorkspaces({ workspaces, binder, sessionExists: async (id) => sessionsAlive.has(id), log: pino({ level: 'silent' }) });
  const session = (engineSession: EngineSession, keep = true): PreparedSession => {
    if (keep) sessionsAlive.add(engineSession.sessionId);
    return {
      sessionId: engineSession.sessionId,
      engineSession,
      mountPath: '/host/run-1',
      workdirOnDisk: TARGET,
      persistent: engineSession.kind !== 'ephemeral',
      release: async () => void events.push('session release'),
    };
  };
  return { events, links, bound, runWorkspaces, session, sessionsAlive };
}

describe('RunWorkspaces.attach', () => {
  it('a new session without a workspace gets its own: made, linked as owned, held and bound before anything runs', async () => {
    const w = world();
    const attached = await w.runWorkspaces.attach({ kind: 'session' }, w.session({ kind: 'new', sessionId: 's1' }), OWNER, { kind: 'run', id: 'run-1' });
    assert.equal(attached.workspaceId, 'own-1');
    assert.deepEqual(w.events, ['create s1', 'link s1 own-1 true', 'acquire own-1 run', 'bind /ws/own-1/tree']);
    w.events.length = 0;
    await attached.session.release();
    await attached.session.release();
    assert.deepEqual(w.events, ['unbind', 'lease release own-1', 'session release'], 'unbound, given back, then the session; once');
  });

  it('a named workspace is linked to a new session (not owned) and held for an agent', async () => {
    const w = world();
    const attached = await w.runWorkspaces.attach({ kind: 'given', id: GIVEN }, w.session({ kind: 'new', sessionId: 's1' }), OWNER, { kind: 'agent', id: 'run-1' });
    assert.equal(attached.workspaceId, GIVEN);
    assert.deepEqual(w.events, [`link s1 ${GIVEN} false`, `acquire ${GIVEN} agent`, `bind /ws/${GIVEN}/tree`]);
  });

  it('a resume keeps its session\'s workspace; naming another one is a 400 naming workspace; a session from before has none', async () => {
    const w = world({ links: { s1: { id: 'own-9', owned: true } } });
    const resumed = await w.runWorkspaces.attach({ kind: 'session' }, w.session({ kind: 'resume', sessionId: 's1' }), OWNER, { kind: 'run', id: 'r' });
    assert.equal(resumed.workspaceId, 'own-9');
    await resumed.session.release();
    await assert.rejects(
      w.runWorkspaces.attach({ kind: 'given', id: GIVEN }, w.session({ kind: 'resume', sessionId: 's1' }), OWNER, { kind: 'run', id: 'r' }),
      refused(/^workspace: /),
    );
    const old = await w.runWorkspaces.attach({ kind: 'session' }, w.session({ kind: 'resume', sessionId: 's-old' }), OWNER, { kind: 'run', id: 'r' });
    assert.equal(old.workspaceId, undefined);
  });

  it('a fork gets a copy of its parent\'s workspace; a throw-away run only a named one', async () => {
    const w = world({ links: { parent: { id: 'own-p', owned: true } } });
    const fork = await w.runWorkspaces.attach({ kind: 'session' }, w.session({ kind: 'fork', fromSessionId: 'parent', sessionId: 'child' }), OWNER, { kind: 'run', id: 'r' });
    assert.equal(fork.workspaceId, 'copy-of-own-p');
    assert.ok(w.events.includes('fork own-p child'));
    const ephemeral = await w.runWorkspaces.attach({ kind: 'given', id: GIVEN }, w.session({ kind: 'ephemeral', sessionId: 'e' }), OWNER, { kind: 'run', id: 'r2' });
    assert.equal(ephemeral.workspaceId, GIVEN);
    assert.ok(!w.events.some((event) => event.startsWith('link e')), 'a throw-away session is never linked');
  });

  it('a busy workspace is refused (409) with nothing bound; the new session\'s own workspace goes with the session', async () => {
    const w = world({ busy: true });
    const session = w.session({ kind: 'new', sessionId: 's1' }, false);
    await assert.rejects(w.runWorkspaces.attach({ kind: 'session' }, session, OWNER, { kind: 'run', id: 'r' }), (error: unknown) => error instanceof BerthError && error.status === 409);
    assert.equal(w.bound.size, 0);
    await w.runWorkspaces.releaseUnattached(session);
    assert.deepEqual(w.events.slice(-2), ['session release', 'removeForSession s1']);
  });

  it('a new session whose run ended before any transcript loses its own workspace on release', async () => {
    const w = world();
    const attached = await w.runWorkspaces.attach({ kind: 'session' }, w.session({ kind: 'new', sessionId: 's1' }), OWNER, { kind: 'run', id: 'r' });
    w.sessionsAlive.delete('s1');
    await attached.session.release();
    assert.deepEqual(w.events.slice(-4), ['unbind', 'lease release own-1', 'session release', 'removeForSession s1']);
  });

  it('a run followed again after a restart holds the workspace found bound at its workdir, and unbinds it at its end', async () => {
    const w = world();
    w.bound.set(TARGET, `/ws/${GIVEN}/tree`);
    const session = await w.runWorkspaces.reattach(w.session({ kind: 'resume', sessionId: 's1' }), OWNER, { kind: 'agent', id: 'run-1' });
    assert.deepEqual(w.events, [`acquire ${GIVEN} agent`]);
    await session.release();
    assert.equal(w.bound.size, 0);
    assert.deepEqual(w.events.slice(1), ['unbind', `lease release ${GIVEN}`, 'session release']);
  });
});

describe('RunWorkspaces.check', () => {
  it('says when a named workspace holds the engine\'s own project files (a pooled engine started without them)', async () => {
    const tree = await mkdtemp(join(tmpdir(), 'berth-check-'));
    try {
      const w = world({ tree });
      assert.deepEqual(await w.runWorkspaces.check({ kind: 'given', id: GIVEN }, OWNER), { configuresEngine: false });
      await writeFile(join(tree, 'README.md'), 'x');
      assert.deepEqual(await w.runWorkspaces.check({ kind: 'given', id: GIVEN }, OWNER), { configuresEngine: false });
      await writeFile(join(tree, 'CLAUDE.md'), 'project instructions');
      assert.deepEqual(await w.runWorkspaces.check({ kind: 'given', id: GIVEN }, OWNER), { configuresEngine: true });
      assert.deepEqual(await w.runWorkspaces.check({ kind: 'session' }, OWNER), { configuresEngine: false });
      await assert.rejects(w.runWorkspaces.check({ kind: 'given', id: GIVEN }, 'mallory'), (error: unknown) => error instanceof BerthError && error.status === 404);
    } finally {
      await rm(tree, { recursive: true, force: true });
    }
  });
});

describe('workspaceIntent (the request\'s workspace field)', () => {
  it('names the caller\'s workspace (lower-cased), or the session\'s own, or none for a throw-away run', () => {
    assert.deepEqual(workspaceIntent(GIVEN.toUpperCase(), { kind: 'new' }, '/workspace', []), { kind: 'given', id: GIVEN });
    assert.deepEqual(workspaceIntent(undefined, { kind: 'new' }, '/workspace', []), { kind: 'session' });
    assert.deepEqual(workspaceIntent(undefined, { kind: 'ephemeral' }, '/workspace', []), { kind: 'none' });
    assert.deepEqual(workspaceIntent(GIVEN, { kind: 'ephemeral' }, '/workspace', []), { kind: 'given', id: GIVEN });
  });

  it('refuses a non-UUID and a workdir another mount covers, naming workspace; without one a covered workdir keeps its volume', () => {
    const refusedNaming = refused(/^workspace: /);
    assert.throws(() => workspaceIntent('../../etc', { kind: 'new' }, '/workspace', []), refusedNaming);
    assert.throws(() => workspaceIntent(GIVEN, { kind: 'new' }, '/workspace', ['/workspace']), refusedNaming);
    assert.throws(() => workspaceIntent(GIVEN, { kind: 'new' }, '/work/project', ['/work']), refusedNaming);
    assert.throws(() => workspaceIntent(GIVEN, { kind: 'new' }, '/tmp/w', []), refusedNaming);
    assert.deepEqual(workspaceIntent(GIVEN, { kind: 'new' }, '/workspace', ['/workspace/data']), { kind: 'given', id: GIVEN });
    assert.deepEqual(workspaceIntent(undefined, { kind: 'new' }, '/workspace', ['/workspace']), { kind: 'none' });
  });
});

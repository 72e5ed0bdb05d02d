// Which workspace a run or agent works in, held for it and put at its workdir; given back on every end.
//
// Once the run has its session (new, resumed, forked, or a pooled engine's): the workspace is resolved
// (a named one is linked to a new session; a new session without one gets one of its own; a resumed session
// keeps what it has; a fork gets a copy of its parent's), acquired (one run or agent at a time: 409), and its
// tree bound onto the directory of the run's disk that the container mounts at the workdir. That happens
// before the engine can write: a run's container is created afterwards (it mounts the directory with the
// bind below it), and a pooled engine, already running, gets its prompt only afterwards (its workdir mount
// receives the bind: runtime/podman/container-spec.ts). The session handed on releases, in this order, the
// bind, the workspace and then the session itself, so every path that releases a session (success, failure,
// timeout, OOM, cancel, disconnect, shutdown, an agent's exit, a restart's follow-up) gives the workspace back.
import { lstat } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { errors } from '../../errors.js';
import type { WorkspaceHolder, WorkspaceLease, WorkspaceService } from '../workspaces/workspace-service.js';
import type { WorkdirBinder } from '../../runtime/workdir-binds.js';
import type { WorkspaceIntent } from '../run-plan.js';
import type { PreparedSession } from '../sessions/session-store.js';

/** What runs use of the workspaces service. */
export type RunWorkspacePort = Pick<
  WorkspaceService,
  | 'available' | 'get' | 'create' | 'acquire' | 'holder' | 'sessionWorkspace' | 'linkSession' | 'forkForSession' | 'removeForSession'
  | 'settleInBackground' | 'settled' | 'withFiles'
>;

/**
 * Names at the top of a workdir that the engine reads when it starts (its project instructions, settings,
 * hooks and MCP servers). A pooled engine started before its workspace was bound read them from an empty
 * directory, so a run whose workspace has one of them takes an engine started for it instead.
 */
export const ENGINE_PROJECT_FILES = ['CLAUDE.md', 'CLAUDE.local.md', '.claude', '.mcp.json'] as const;

/** What check() found out about a named workspace. */
export interface WorkspaceCheck {
  /** The workspace's tree has one of ENGINE_PROJECT_FILES at its top. */
  readonly configuresEngine: boolean;
}

export interface RunWorkspacesDependencies {
  readonly workspaces: RunWorkspacePort;
  readonly binder: WorkdirBinder;
  /** Whether the session still exists once its run released it (a new session whose run failed does not). */
  sessionExists(sessionId: string): Promise<boolean>;
  readonly log: Logger;
}

/** The session of a run that holds a workspace, and which one. */
export interface AttachedWorkspace {
  readonly session: PreparedSession;
  readonly workspaceId: string | undefined;
}

export class RunWorkspaces {
  constructor(private readonly deps: RunWorkspacesDependencies) {}

  /**
   * Before anything is taken for the run: a named workspace must exist and be the caller's (404, as for
   * another caller's), this Berth must have workspaces (503), and one held by a run now is refused early
   * (409) rather than after a pooled engine was claimed for nothing. A run answered before it ended is
   * waited for instead.
   */
  async check(intent: WorkspaceIntent, owner: string): Promise<WorkspaceCheck> {
    if (intent.kind !== 'given') return { configuresEngine: false };
    await this.deps.workspaces.get(owner, intent.id);
    if (this.deps.workspaces.holder(intent.id) !== undefined) throw errors.workspaceBusy(intent.id);
    // Through the nosymfollow view; lstat: a link of that name counts, it is never followed.
    const configuresEngine = await this.deps.workspaces.withFiles(owner, intent.id, 'read', async (ws) => {
      const found = await Promise.all(ENGINE_PROJECT_FILES.map((name) => lstat(join(ws.tree, name)).then(() => true, () => false)));
      return found.includes(true);
    });
    return { configuresEngine };
  }

  /**
   * The run's workspace, acquired and bound at its workdir; the session returned gives it back when released.
   * On failure nothing of the workspace is held or bound, and the session is the caller's to release
   * (releaseUnattached, after its container is gone).
   */
  async attach(intent: WorkspaceIntent, session: PreparedSession, owner: string, holder: WorkspaceHolder): Promise<AttachedWorkspace> {
    const target = session.workdirOnDisk;
    if (intent.kind === 'none' || !this.deps.workspaces.available || target === undefined) {
      // A Berth without run disks has no workspaces; check() refused a named one already.
      if (intent.kind === 'given') throw errors.runtimeUnavailable('workspaces need a rootful Berth (runs there have no disk of their own to mount one in)');
      return { session, workspaceId: undefined };
    }
    const workspaceId = await this.resolve(intent, session, owner);
    if (workspaceId === undefined) return { session, workspaceId };
    await this.deps.workspaces.settled(workspaceId);
    const lease = await this.deps.workspaces.acquire(owner, workspaceId, holder);
    try {
      await this.deps.binder.bind(lease.treeHostPath, target);
    } catch (error) {
      await lease.release();
      throw error;
    }
    return { session: this.holding(session, lease, target), workspaceId };
  }

  /**
   * A run or agent a previous process started, followed again: the workspace bound at its workdir (the bind
   * outlived the process) is held again for it, and given back when it ends like any run's.
   */
  async reattach(session: PreparedSession, owner: string, holder: WorkspaceHolder): Promise<PreparedSession> {
    const target = session.workdirOnDisk;
    if (target === undefined || !this.deps.workspaces.available) return session;
    const workspaceId = await this.deps.binder.boundAt(target);
    if (workspaceId === undefined) return session;
    try {
      const lease = await this.deps.workspaces.acquire(owner, workspaceId, holder);
      return this.holding(session, lease, target);
    } catch (error) {
      // Not held (deleted meanwhile?): the engine keeps what it has; the bind still goes at the end.
      this.deps.log.warn({ err: error, workspace: workspaceId, sessionId: session.sessionId }, 'the workspace of a run followed again could not be held again');
      return this.withRelease(session, async () => this.unbind(target, workspaceId));
    }
  }

  /** Releases a session attach() refused (or was never called for), with what a new session had made. */
  async releaseUnattached(session: PreparedSession): Promise<void> {
    await session.release();
    await this.forgetIfGone(session);
  }

  /**
   * The run was answered before it ended (its container still holds the workspace): until `rest` settles,
   * a next run, an upload or a read of the workspace waits for it rather than finding it in use.
   */
  settleInBackground(workspaceId: string | undefined, rest: Promise<unknown>): void {
    if (workspaceId !== undefined) this.deps.workspaces.settleInBackground(workspaceId, rest);
  }

  /**
   * The workspace id for this run's session, linking, making or copying it as the session needs; undefined:
   * none (a session from before workspaces, resumed without naming one).
   */
  private async resolve(intent: Exclude<WorkspaceIntent, { kind: 'none' }>, session: PreparedSession, owner: string): Promise<string | undefined> {
    const { workspaces } = this.deps;
    const engine = session.engineSession;
    const given = intent.kind === 'given' ? intent.id : undefined;
    switch (engine.kind) {
      case 'ephemeral':
        return given;
      case 'new':
      case 'fork': {
        // A link under this new session's id is a previous process's, for a run it never started.
        if ((await workspaces.sessionWorkspace(session.sessionId)) !== undefined) await workspaces.removeForSession(session.sessionId);
        if (given !== undefined) {
          await workspaces.linkSession(session.sessionId, given, false);
          return given;
        }
        const parent = engine.kind === 'fork' ? await workspaces.sessionWorkspace(engine.fromSessionId) : undefined;
        if (parent !== undefined) return workspaces.forkForSession(owner, parent.id, session.sessionId);
        const own = await workspaces.create(owner, { ownedBySession: session.sessionId });
        try {
          await workspaces.linkSession(session.sessionId, own.id, true);
        } catch (error) {
          await workspaces.removeForSession(session.sessionId).catch(() => undefined);
          throw error;
        }
        return own.id;
      }
      case 'resume': {
        const linked = await workspaces.sessionWorkspace(session.sessionId);
        if (given === undefined) return linked?.id;
        if (linked !== undefined && linked.id !== given) {
          throw errors.invalid(`workspace: session ${session.sessionId} works in workspace ${linked.id}; resume it without workspace (or with that one), or start a new session with ${given}`);
        }
        // A session from before workspaces takes the one it is resumed with from now on.
        if (linked === undefined) await workspaces.linkSession(session.sessionId, given, false);
        return given;
      }
    }
  }

  /** The session whose release takes the bind away and gives the workspace back before releasing itself. */
  private holding(session: PreparedSession, lease: WorkspaceLease, target: string): PreparedSession {
    return this.withRelease(session, async () => {
      await this.unbind(target, lease.id);
      await lease.release();
    });
  }

  private withRelease(session: PreparedSession, first: () => Promise<void>): PreparedSession {
    let releasing: Promise<void> | undefined;
    return {
      ...session,
      release: () => {
        releasing ??= (async () => {
          try {
            await first();
          } finally {
            await this.releaseUnattached(session);
          }
        })();
        return releasing;
      },
    };
  }

  private async unbind(target: string, workspaceId: string): Promise<void> {
    await this.deps.binder.unbind(target).catch((error: unknown) => {
      // The run disk's release detaches it with everything below (umount -l), so nothing stays mounted.
      this.deps.log.error({ err: error, workspace: workspaceId, target }, 'a workspace could not be unbound from a run\'s workdir');
    });
  }

  /** A new session whose run ended before its engine wrote anything is gone: so is what it had of a workspace. */
  private async forgetIfGone(session: PreparedSession): Promise<void> {
    if (!session.persistent || !this.deps.workspaces.available) return;
    if (await this.deps.sessionExists(session.sessionId)) return;
    await this.deps.workspaces.removeForSession(session.sessionId).catch((error: unknown) => {
      this.deps.log.error({ err: error, sessionId: session.sessionId }, 'the workspace of a session that ended before its first transcript could not be removed');
    });
  }
}

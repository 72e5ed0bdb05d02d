// The sessions runs and agents take: a session's directory (session-dirs.ts) held by one run at a time
// (session-leases.ts), with a configuration directory of the run's own to mount (run-config-dirs.ts) whose
// transcript is carried back when the run ends.
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { errors } from '../../errors.js';
import type { SessionIntent } from '../run-plan.js';
import type { EngineSession } from '../../engine/command.js';
import { Settling } from '../settling.js';
import { RunConfigDirs, type RunConfigDir } from './run-config-dirs.js';
import { HIDDEN_MARKER, projectDirName, SessionDirs } from './session-dirs.js';
import { SessionLeases, type SessionLease } from './session-leases.js';
import { checkSessionUuid } from './session-id.js';
import type { SharedSessions } from './shared-sessions.js';
import { WRITABLE_DIR, type RunDisks, type WritablePlace } from '../../runtime/run-disk.js';

export { checkSessionUuid, HIDDEN_MARKER, projectDirName };

/** A session directory prepared for one run, with what to undo when the run ends. */
export interface PreparedSession {
  readonly sessionId: string;
  readonly engineSession: EngineSession;
  /** Host path to mount as the engine's config directory: a fresh directory of this run's own. */
  readonly mountPath: string;
  /** With a disk limit: host paths of the container's other writable places, on the run's own file system. */
  readonly writable?: Readonly<Record<WritablePlace, string>>;
  /**
   * With a disk limit: Berth's path of the directory mounted at the workdir (`writable.workdir` as Berth
   * sees it), where a workspace's tree is bound (core/runs/run-workspace.ts).
   */
  readonly workdirOnDisk?: string;
  /** Whether the session outlives the run (false for no_persistence). */
  readonly persistent: boolean;
  /**
   * Only for a session the run creates new: gives it its title (engine/session-title.ts), recorded in its
   * transcript when the run ends.
   */
  readonly recordTitle?: (title: string) => Promise<void>;
  /**
   * With a shared database, for a session that outlives the run: carries the transcript written so far back
   * and saves it there, while the engine goes on (an agent after each turn, so that its session resumes on
   * another node should this one be lost). Never overlaps another save of the run or its release.
   */
  readonly saveProgress?: () => Promise<void>;
  release(): Promise<void>;
}

/** How a run's config dir is made: named by the run id (found again after a restart), on a disk of this size. */
interface RunDirOptions {
  readonly runId: string | undefined;
  readonly diskBytes: number | undefined;
}

/** A listed session directory. */
export interface StoredSession {
  readonly id: string;
  readonly dir: string;
  /** When the engine last wrote its transcript (the directory's time while it has none). */
  readonly lastActivityMs: number;
  /** Its title, when the listing comes from the shared database (else read from the transcript). */
  readonly title?: string;
}

/** A run directory's writable places, when it is a disk: as the container runtime and as Berth see them. */
function onDisk(run: RunConfigDir): Pick<PreparedSession, 'writable' | 'workdirOnDisk'> {
  if (!run.writable) return {};
  return { writable: run.writable, workdirOnDisk: join(run.dir, WRITABLE_DIR, 'workdir') };
}

export class SessionStore {
  private readonly leases = new SessionLeases();
  /** Sessions whose run was answered while its engine, container and transcript were still being finished. */
  private readonly settling = new Settling();
  private readonly dirs: SessionDirs;
  private runDirs: RunConfigDirs | undefined;

  constructor(
    dir: string,
    private readonly hostDir: string,
    private readonly options: {
      readonly transcriptLimitBytes: number;
      readonly onCarryRefused?: (sessionId: string, reasons: readonly string[]) => void;
      /** Each run's config dir is then the root of a file system of the run's container.disk (runtime/run-disk.ts). */
      readonly disks?: RunDisks;
      /**
       * With a shared database (SERVICE_DATABASE_URL): sessions saved there at the end of each run, restored
       * from there before a run or a read takes one, listed from there (shared-sessions.ts).
       */
      readonly shared?: SharedSessions;
      /** A save to the shared database failed (the session then lives on this node only until the next save). */
      readonly onSaveFailed?: (sessionId: string, error: unknown) => void;
    },
  ) {
    this.dirs = new SessionDirs(dir);
  }

  /** Berth's (symlink-free) path of the sessions directory. */
  get dir(): string {
    return this.dirs.dir;
  }

  /** `liveRuns`: ids of runs a previous process started whose containers still run; their directories stay. */
  async init(liveRuns: ReadonlySet<string> = new Set()): Promise<void> {
    await this.dirs.init();
    this.runDirs = new RunConfigDirs(
      SessionDirs.runsDirIn(this.dirs.dir),
      SessionDirs.runsDirIn(this.hostDir),
      this.options.transcriptLimitBytes,
      this.options.disks,
    );
    const salvaged = await this.runDirs.init(liveRuns);
    if (this.options.shared) await this.saveUnshared(salvaged);
  }

  /**
   * At start with a shared database: what only this node has is saved there — sessions a cut-off run's
   * salvage just carried a transcript into, and sessions from before the database was configured (never
   * saved), which would otherwise be missing from every listing.
   */
  private async saveUnshared(salvaged: readonly string[]): Promise<void> {
    const shared = this.options.shared!;
    const pending = new Set(salvaged);
    for (const id of await this.dirs.ids()) {
      if (!pending.has(id) && (await shared.savedHere(id))) continue;
      if (!(await this.dirs.neverRan(id))) pending.add(id);
      else pending.delete(id);
    }
    for (const id of pending) await this.saveShared(id);
  }

  /**
   * Takes the session of a run a previous process started and this one follows again: the run's own
   * configuration directory (named by its run id) is found again, and release() carries its transcript back
   * as for any run. Undefined when that directory is gone.
   */
  async reclaim(run: { readonly runId: string; readonly sessionId: string; readonly owner: string; readonly workdir: string; readonly persistent: boolean }): Promise<PreparedSession | undefined> {
    const sessionId = checkSessionUuid(run.sessionId);
    const dir = this.dirs.at(sessionId);
    const runDir = await this.runs.existing(run.runId, projectDirName(run.workdir), run.persistent ? dir : undefined);
    if (!runDir) return undefined;
    const lease = this.leases.take(sessionId);
    const saves = this.progressSaves(runDir, sessionId, run.persistent);
    return {
      sessionId,
      engineSession: run.persistent ? { kind: 'resume', sessionId } : { kind: 'ephemeral', sessionId },
      mountPath: runDir.hostPath,
      ...onDisk(runDir),
      persistent: run.persistent,
      ...saves.exposed,
      release: async () => {
        await saves.done();
        try {
          if (run.persistent) {
            if (!(await this.dirs.exists(sessionId))) await this.dirs.create(sessionId, run.owner).catch(() => undefined);
            await this.carryBack(runDir, sessionId);
            if (await this.dirs.neverRan(sessionId)) await this.dirs.remove(sessionId);
            else await this.saveShared(sessionId);
          }
        } finally {
          await this.runs.remove(runDir).catch(() => undefined);
          lease.release();
        }
      },
    };
  }

  /**
   * The session's run was answered before it ended (RunService.executeUntilAnswered): until `rest` has
   * settled, every request that reads or takes the session waits for it instead of seeing it half-done.
   */
  settleInBackground(sessionId: string, rest: Promise<unknown>): void {
    this.settling.add(sessionId, rest);
  }

  /** Resolves once the named session (or, without one, every session) has no answered run still ending. */
  async settled(sessionId?: string): Promise<void> {
    await this.settling.settled(sessionId);
  }

  private get runs(): RunConfigDirs {
    if (!this.runDirs) throw new Error('SessionStore.init() was not called');
    return this.runDirs;
  }

  pathOf(sessionId: string): string {
    return this.dirs.pathOf(sessionId);
  }

  async exists(sessionId: string): Promise<boolean> {
    return this.dirs.exists(checkSessionUuid(sessionId));
  }

  /** Whether the session exists, belongs to `owner` and is not a persistent agent's. */
  async isVisible(sessionId: string, owner: string): Promise<boolean> {
    const id = checkSessionUuid(sessionId);
    await this.settled(id);
    await this.restoreShared(id);
    return (await this.dirs.belongsTo(id, owner)) && !(await this.dirs.isHidden(id));
  }

  /** Marks a session as a persistent agent's (the agents service calls this for the sessions it owns). */
  async hide(sessionId: string): Promise<void> {
    await this.dirs.hide(checkSessionUuid(sessionId));
  }

  /** Gives a session prepared for nobody yet (a pooled engine's) to the caller that claimed it. */
  async assignOwner(sessionId: string, owner: string): Promise<void> {
    await this.dirs.assignOwner(checkSessionUuid(sessionId), owner);
  }

  /** Removes the sessions of an owner that never ran (pooled engines' left by a killed process). */
  async removeUnused(ownerPrefix: string): Promise<number> {
    let removed = 0;
    for (const id of await this.dirs.ids()) {
      if (this.leases.isHeld(id)) continue;
      const owner = await this.dirs.ownerOf(id);
      if (owner?.startsWith(ownerPrefix) && (await this.dirs.neverRan(id))) {
        await this.dirs.remove(id);
        removed += 1;
      }
    }
    return removed;
  }

  /**
   * Removes the owner's session directory when no run ever wrote a transcript in it (a pending job's, made by
   * a previous process), so that it can be made again under the same id; a session with history is kept.
   */
  async removeIfNeverRun(sessionId: string, owner: string): Promise<void> {
    const id = checkSessionUuid(sessionId);
    if (this.leases.isHeld(id) || !(await this.dirs.belongsTo(id, owner))) return;
    if (await this.dirs.neverRan(id)) await this.dirs.remove(id);
  }

  isBusy(sessionId: string): boolean {
    return this.leases.isHeld(checkSessionUuid(sessionId));
  }

  /**
   * Creates or finds the directory for a run and holds the session until release(); a second run on a held
   * session is refused with 409 (session-leases.ts).
   */
  async prepare(
    intent: SessionIntent,
    workdir: string,
    options: { readonly owner: string; readonly presetId?: string; readonly runId?: string; readonly diskBytes?: number },
  ): Promise<PreparedSession> {
    const { owner, presetId } = options;
    const run = { runId: options.runId, diskBytes: options.diskBytes };
    switch (intent.kind) {
      case 'new':
        return this.createNew(workdir, owner, presetId, run);
      case 'resume':
        return this.claimExisting(workdir, owner, checkSessionUuid(intent.sessionId), run);
      case 'continue': {
        const latest = await this.latestForWorkdir(workdir, owner);
        return latest === undefined ? this.createNew(workdir, owner, presetId, run) : this.claimExisting(workdir, owner, latest, run);
      }
      case 'fork':
        return this.fork(workdir, owner, checkSessionUuid(intent.fromSessionId), presetId, run);
      case 'ephemeral': {
        const sessionId = presetId === undefined ? randomUUID() : checkSessionUuid(presetId);
        const runDir = await this.runs.create(projectDirName(workdir), undefined, run.runId, undefined, run.diskBytes);
        return {
          sessionId,
          engineSession: { kind: 'ephemeral', sessionId },
          mountPath: runDir.hostPath,
          ...onDisk(runDir),
          persistent: false,
          release: () => this.runs.remove(runDir),
        };
      }
    }
  }

  /**
   * The owner's visible session whose transcript for this workdir was written last, if any. The
   * transcript's time is when Berth carried it back from a run, never a time a run could set.
   */
  async latestForWorkdir(workdir: string, owner: string): Promise<string | undefined> {
    await this.settled();
    if (this.options.shared) return this.options.shared.latestForProject(owner, projectDirName(workdir));
    let best: { id: string; mtime: number } | undefined;
    for (const id of await this.dirs.ids()) {
      if (!(await this.dirs.belongsTo(id, owner))) continue;
      const mtime = await this.dirs.transcriptTime(id, workdir);
      if (mtime === undefined || (best && mtime <= best.mtime)) continue;
      if (!(await this.dirs.isHidden(id).catch(() => true))) best = { id, mtime };
    }
    return best?.id;
  }

  /** The owner's visible sessions, most recently active first. */
  async list(owner: string): Promise<StoredSession[]> {
    await this.settled();
    if (this.options.shared) {
      return (await this.options.shared.list(owner)).map((listed) => ({ id: listed.id, dir: this.dirs.at(listed.id), lastActivityMs: listed.lastActivityMs, title: listed.title }));
    }
    const sessions: StoredSession[] = [];
    for (const id of await this.dirs.ids()) {
      try {
        if (!(await this.dirs.belongsTo(id, owner)) || (await this.dirs.isHidden(id))) continue;
        sessions.push({ id, dir: this.dirs.at(id), lastActivityMs: await this.dirs.lastActivity(id) });
      } catch (error) {
        // Deleted while being listed.
        if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
      }
    }
    return sessions.sort((a, b) => b.lastActivityMs - a.lastActivityMs || a.id.localeCompare(b.id));
  }

  /** Deletes a visible session's directory: 404 when there is none, 409 while a run or agent uses it. */
  async remove(sessionId: string, owner: string, teardown?: (sessionId: string) => Promise<void>): Promise<void> {
    const id = checkSessionUuid(sessionId);
    if (!(await this.isVisible(id, owner))) throw errors.sessionNotFound(id);
    // Held while deleting, so no run can claim the directory half-way through.
    const lease = this.leases.take(id);
    try {
      await teardown?.(id);
      await this.dirs.remove(id);
      await this.options.shared?.remove(id);
    } finally {
      lease.release();
    }
  }

  private async createNew(workdir: string, owner: string, presetId: string | undefined, run: RunDirOptions): Promise<PreparedSession> {
    const sessionId = presetId === undefined ? randomUUID() : checkSessionUuid(presetId);
    const lease = this.leases.take(sessionId);
    try {
      await this.dirs.create(sessionId, owner);
      return await this.claimed(workdir, lease, { kind: 'new', sessionId }, true, undefined, run);
    } catch (error) {
      await this.dirs.remove(sessionId);
      lease.release();
      throw error;
    }
  }

  private async claimExisting(workdir: string, owner: string, sessionId: string, run: RunDirOptions): Promise<PreparedSession> {
    await this.settled(sessionId);
    // Taken before the existence check: a concurrent DELETE either finished (404 here) or is refused.
    const lease = this.leases.take(sessionId);
    try {
      await this.restoreShared(sessionId);
      if (!(await this.dirs.belongsTo(sessionId, owner))) throw errors.sessionNotFound(sessionId);
      return await this.claimed(workdir, lease, { kind: 'resume', sessionId }, false, { sessionDir: this.dirs.at(sessionId), sessionId }, run);
    } catch (error) {
      lease.release();
      throw error;
    }
  }

  private async fork(workdir: string, owner: string, from: string, presetId: string | undefined, run: RunDirOptions): Promise<PreparedSession> {
    const sessionId = presetId === undefined ? randomUUID() : checkSessionUuid(presetId);
    await this.settled(from);
    // The forked run gets a copy of the original's transcripts in its own directory, so the original is
    // never written by it. The original is held while it is copied: a run writing it meanwhile would leave
    // a half-written line in the copy.
    const original = this.leases.take(from);
    try {
      await this.restoreShared(from);
      if (!(await this.dirs.belongsTo(from, owner))) throw errors.sessionNotFound(from);
      const lease = this.leases.take(sessionId);
      try {
        if (await this.dirs.occupied(sessionId)) throw errors.internal(`session directory ${sessionId} already exists`);
        await this.dirs.create(sessionId, owner);
        return await this.claimed(workdir, lease, { kind: 'fork', fromSessionId: from, sessionId }, true, { sessionDir: this.dirs.at(from), sessionId: from }, run);
      } catch (error) {
        await this.dirs.remove(sessionId);
        lease.release();
        throw error;
      }
    } finally {
      original.release();
    }
  }

  /**
   * A run's saves of its transcript so far (PreparedSession.saveProgress), one at a time: a save asked for
   * while one runs is made once after it; `done()` waits for the last, and later asks do nothing.
   */
  private progressSaves(run: RunConfigDir, sessionId: string, persistent: boolean): { exposed: Pick<PreparedSession, 'saveProgress'>; done(): Promise<void> } {
    if (!this.options.shared || !persistent) return { exposed: {}, done: async () => undefined };
    let chain: Promise<void> = Promise.resolve();
    let queued = false;
    let ended = false;
    const saveProgress = async (): Promise<void> => {
      if (ended || queued) return chain;
      queued = true;
      chain = chain.then(async () => {
        queued = false;
        if (ended) return;
        try {
          await this.carryBack(run, sessionId);
          if (!(await this.dirs.neverRan(sessionId))) await this.saveShared(sessionId);
        } catch (error) {
          this.options.onSaveFailed?.(sessionId, error);
        }
      });
      return chain;
    };
    return {
      exposed: { saveProgress },
      done: async () => {
        ended = true;
        await chain;
      },
    };
  }

  /** With a shared database: this node's copy brought up to the database's before the session is used. */
  private async restoreShared(sessionId: string): Promise<void> {
    await this.options.shared?.restore(sessionId);
  }

  /**
   * With a shared database: the session saved there once its run carried the transcript back. A failure is
   * reported, not thrown: the run has ended and its session is whole on this node.
   */
  private async saveShared(sessionId: string): Promise<void> {
    if (!this.options.shared || !(await this.dirs.exists(sessionId))) return;
    await this.options.shared.save(sessionId).catch((error: unknown) => this.options.onSaveFailed?.(sessionId, error));
  }

  /** Carries a run's transcript back into its session's directory, reporting what was refused. */
  private async carryBack(runDir: RunConfigDir, sessionId: string): Promise<void> {
    const carried = await this.runs.carryBack(runDir, sessionId, this.dirs.at(sessionId));
    if (carried.refused.length > 0) this.options.onCarryRefused?.(sessionId, carried.refused);
  }

  /**
   * A session taken by a run, with the run's own configuration directory. When the run ends its transcript
   * is carried back; a session this run created (new, fork) that ends without a transcript (the run failed
   * before the engine wrote one) is removed again.
   */
  private async claimed(
    workdir: string,
    lease: SessionLease,
    engineSession: EngineSession,
    created: boolean,
    carry: { readonly sessionDir: string; readonly sessionId: string } | undefined,
    options: RunDirOptions,
  ): Promise<PreparedSession> {
    const { sessionId } = lease;
    // Named by the run id when there is one, so that a later process can find a run it follows again.
    const run: RunConfigDir = await this.runs.create(projectDirName(workdir), carry, options.runId, sessionId, options.diskBytes);
    const saves = this.progressSaves(run, sessionId, true);
    return {
      sessionId,
      engineSession,
      mountPath: run.hostPath,
      ...onDisk(run),
      persistent: true,
      ...(engineSession.kind === 'new' ? { recordTitle: (title: string) => this.runs.noteTitle(run, title) } : {}),
      ...saves.exposed,
      release: async () => {
        await saves.done();
        try {
          await this.carryBack(run, sessionId);
          if (created && (await this.dirs.neverRan(sessionId))) await this.dirs.remove(sessionId);
          else await this.saveShared(sessionId);
        } finally {
          await this.runs.remove(run).catch(() => undefined);
          lease.release();
        }
      },
    };
  }
}

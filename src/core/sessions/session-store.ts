// Session directories on disk: one per session id under SERVICE_AGENT_SESSIONS_DIR, holding the session's
// transcripts, written by Berth only. A run never mounts one: it gets a fresh engine configuration
// directory with copies of the transcripts (run-config-dirs.ts), and its own transcript is carried back
// when it ends, so nothing a run plants there changes how a later run of the session starts.
// Every path is built from an id that passed UUID_PATTERN first: `../../etc` never reaches the filesystem.
import { randomUUID } from 'node:crypto';
import { constants } from 'node:fs';
import { mkdir, open, readdir, readFile, realpath, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { errors } from '../../errors.js';
import type { SessionIntent } from '../run-plan.js';
import type { EngineSession } from '../../engine/command.js';
import { transcriptFiles } from '../../engine/transcript.js';
import { isDirectory, pathExists } from './session-files.js';
import { RunConfigDirs, type RunConfigDir } from './run-config-dirs.js';
import { checkSessionUuid } from './session-id.js';
import { UUID_PATTERN } from '../../uuid.js';
import { WRITABLE_DIR, type RunDisks, type WritablePlace } from '../../runtime/run-disk.js';

export { checkSessionUuid };

/** Per-run engine configuration directories (run-config-dirs.ts). */
const RUNS_DIR = '.runs';
/** A session directory holding this file belongs to a persistent agent: not listed, its transcript not served. */
export const HIDDEN_MARKER = '.berth-agent';
/** The caller that created the session (core/auth/caller.ts); absent for sessions from before owners existed. */
const OWNER_FILE = '.berth-owner';

/** The engine names a project directory after its cwd with every non-alphanumeric character replaced by '-'. */
export function projectDirName(cwd: string): string {
  return cwd.replace(/[^A-Za-z0-9]/g, '-');
}

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
}

/** A run directory's writable places, when it is a disk: as the container runtime and as Berth see them. */
function onDisk(run: RunConfigDir): Pick<PreparedSession, 'writable' | 'workdirOnDisk'> {
  if (!run.writable) return {};
  return { writable: run.writable, workdirOnDisk: join(run.dir, WRITABLE_DIR, 'workdir') };
}

export class SessionStore {
  private readonly busy = new Set<string>();
  /** Sessions whose run was answered while its engine, container and transcript were still being finished. */
  private readonly settling = new Map<string, Promise<void>>();
  private root: string;
  private runDirs: RunConfigDirs | undefined;

  constructor(
    dir: string,
    private readonly hostDir: string,
    private readonly options: {
      readonly transcriptLimitBytes: number;
      readonly onCarryRefused?: (sessionId: string, reasons: readonly string[]) => void;
      /** Each run's config dir is then the root of a file system of the run's container.disk (runtime/run-disk.ts). */
      readonly disks?: RunDisks;
    },
  ) {
    this.root = dir;
  }

  /** Berth's (symlink-free) path of the sessions directory. */
  get dir(): string {
    return this.root;
  }

  /** `liveRuns`: ids of runs a previous process started whose containers still run; their directories stay. */
  async init(liveRuns: ReadonlySet<string> = new Set()): Promise<void> {
    await mkdir(this.root, { recursive: true, mode: 0o700 });
    // Transcripts are read only at lexical paths below a real one (engine/transcript.ts checks it).
    this.root = await realpath(this.root);
    this.runDirs = new RunConfigDirs(join(this.root, RUNS_DIR), join(this.hostDir, RUNS_DIR), this.options.transcriptLimitBytes, this.options.disks);
    await this.runDirs.init(liveRuns);
  }

  /**
   * Takes the session of a run a previous process started and this one follows again: the run's own
   * configuration directory (named by its run id) is found again, and release() carries its transcript back
   * as for any run. Undefined when that directory is gone.
   */
  async reclaim(run: { readonly runId: string; readonly sessionId: string; readonly owner: string; readonly workdir: string; readonly persistent: boolean }): Promise<PreparedSession | undefined> {
    const sessionId = checkSessionUuid(run.sessionId);
    const dir = join(this.root, sessionId);
    const runDir = await this.runs.existing(run.runId, projectDirName(run.workdir), run.persistent ? dir : undefined);
    if (!runDir) return undefined;
    this.lock(sessionId);
    return {
      sessionId,
      engineSession: run.persistent ? { kind: 'resume', sessionId } : { kind: 'ephemeral', sessionId },
      mountPath: runDir.hostPath,
      ...onDisk(runDir),
      persistent: run.persistent,
      release: async () => {
        try {
          if (run.persistent) {
            if (!(await isDirectory(dir))) await this.createDir(sessionId, run.owner).catch(() => undefined);
            const carried = await this.runs.carryBack(runDir, sessionId, dir);
            if (carried.refused.length > 0) this.options.onCarryRefused?.(sessionId, carried.refused);
            if ((await transcriptFiles(dir, sessionId)).length === 0) await rm(dir, { recursive: true, force: true });
          }
        } finally {
          await this.runs.remove(runDir).catch(() => undefined);
          this.busy.delete(sessionId);
        }
      },
    };
  }

  /**
   * The session's run was answered before it ended (RunService.executeUntilAnswered): until `rest` has
   * settled, every request that reads or takes the session waits for it instead of seeing it half-done.
   */
  settleInBackground(sessionId: string, rest: Promise<unknown>): void {
    const settled = rest.then(
      () => undefined,
      () => undefined,
    );
    this.settling.set(sessionId, settled);
    void settled.then(() => {
      if (this.settling.get(sessionId) === settled) this.settling.delete(sessionId);
    });
  }

  /** Resolves once the named session (or, without one, every session) has no answered run still ending. */
  async settled(sessionId?: string): Promise<void> {
    if (sessionId !== undefined) {
      await this.settling.get(sessionId);
      return;
    }
    await Promise.all([...this.settling.values()]);
  }

  private get runs(): RunConfigDirs {
    if (!this.runDirs) throw new Error('SessionStore.init() was not called');
    return this.runDirs;
  }

  pathOf(sessionId: string): string {
    return join(this.root, checkSessionUuid(sessionId));
  }

  async exists(sessionId: string): Promise<boolean> {
    return isDirectory(this.pathOf(sessionId));
  }

  /** Whether the session exists, belongs to `owner` and is not a persistent agent's. */
  async isVisible(sessionId: string, owner: string): Promise<boolean> {
    const dir = this.pathOf(sessionId);
    await this.settled(checkSessionUuid(sessionId));
    return (await this.belongsTo(dir, owner)) && !(await pathExists(join(dir, HIDDEN_MARKER)));
  }

  /** Whether the session directory exists and was created by `owner`. */
  private async belongsTo(dir: string, owner: string): Promise<boolean> {
    if (!(await isDirectory(dir))) return false;
    const recorded = await readFile(join(dir, OWNER_FILE), 'utf8').catch((error: NodeJS.ErrnoException) => {
      if (error.code === 'ENOENT') return '';
      throw error;
    });
    return recorded === owner;
  }

  /** Marks a session as a persistent agent's (the agents service calls this for the sessions it owns). */
  async hide(sessionId: string): Promise<void> {
    // O_NOFOLLOW: the directory is writable from the container; a planted link must not be followed.
    const marker = await open(join(this.pathOf(sessionId), HIDDEN_MARKER), constants.O_WRONLY | constants.O_CREAT | constants.O_NOFOLLOW, 0o644);
    await marker.close();
  }

  /** Gives a session prepared for nobody yet (a pooled engine's) to the caller that claimed it. */
  async assignOwner(sessionId: string, owner: string): Promise<void> {
    const path = join(this.pathOf(checkSessionUuid(sessionId)), OWNER_FILE);
    // The directory is Berth's only; O_NOFOLLOW all the same, as for every write there.
    const file = await open(path, constants.O_WRONLY | constants.O_TRUNC | constants.O_NOFOLLOW);
    try {
      await file.writeFile(owner);
    } finally {
      await file.close();
    }
  }

  /** Removes the sessions of an owner that never ran (pooled engines' left by a killed process). */
  async removeUnused(ownerPrefix: string): Promise<number> {
    let removed = 0;
    for (const id of await this.sessionIds()) {
      if (this.busy.has(id)) continue;
      const dir = join(this.root, id);
      const owner = await readFile(join(dir, OWNER_FILE), 'utf8').catch(() => undefined);
      if (owner?.startsWith(ownerPrefix) && (await transcriptFiles(dir, id)).length === 0) {
        await rm(dir, { recursive: true, force: true });
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
    const dir = join(this.root, id);
    if (this.busy.has(id) || !(await this.belongsTo(dir, owner))) return;
    if ((await transcriptFiles(dir, id)).length === 0) await rm(dir, { recursive: true, force: true });
  }

  isBusy(sessionId: string): boolean {
    return this.busy.has(checkSessionUuid(sessionId));
  }

  /**
   * Creates or finds the directory for a run and marks the session busy until release(). A second run
   * on a busy session is refused with 409 rather than queued: two engines writing one transcript corrupt it,
   * and a caller that retries knows its turn order, which a queue would hide.
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
    const project = projectDirName(workdir);
    await this.settled();
    let best: { id: string; mtime: number } | undefined;
    for (const id of await this.sessionIds()) {
      if (!(await this.belongsTo(join(this.root, id), owner))) continue;
      try {
        const info = await stat(join(this.root, id, 'projects', project, `${id}.jsonl`));
        if ((!best || info.mtimeMs > best.mtime) && !(await pathExists(join(this.root, id, HIDDEN_MARKER)))) {
          best = { id, mtime: info.mtimeMs };
        }
      } catch {
        // No transcript of this session for this workdir.
      }
    }
    return best?.id;
  }

  /** The owner's visible sessions, most recently active first. */
  async list(owner: string): Promise<StoredSession[]> {
    await this.settled();
    const sessions: StoredSession[] = [];
    for (const id of await this.sessionIds()) {
      const dir = join(this.root, id);
      try {
        if (!(await this.belongsTo(dir, owner)) || (await pathExists(join(dir, HIDDEN_MARKER)))) continue;
        const files = await transcriptFiles(dir, id);
        let lastActivityMs = files.length === 0 ? (await stat(dir)).mtimeMs : 0;
        for (const file of files) lastActivityMs = Math.max(lastActivityMs, (await stat(file)).mtimeMs);
        sessions.push({ id, dir, lastActivityMs });
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
    this.lock(id);
    try {
      await teardown?.(id);
      await rm(join(this.root, id), { recursive: true, force: true });
    } finally {
      this.busy.delete(id);
    }
  }

  private async sessionIds(): Promise<string[]> {
    const entries = await readdir(this.root, { withFileTypes: true });
    return entries.filter((entry) => entry.isDirectory() && UUID_PATTERN.test(entry.name)).map((entry) => entry.name);
  }

  private async createNew(workdir: string, owner: string, presetId: string | undefined, run: RunDirOptions): Promise<PreparedSession> {
    const sessionId = presetId === undefined ? randomUUID() : checkSessionUuid(presetId);
    this.lock(sessionId);
    try {
      await this.createDir(sessionId, owner);
      return await this.claimed(workdir, sessionId, { kind: 'new', sessionId }, true, undefined, run);
    } catch (error) {
      await rm(join(this.root, sessionId), { recursive: true, force: true });
      this.busy.delete(sessionId);
      throw error;
    }
  }

  private async claimExisting(workdir: string, owner: string, sessionId: string, run: RunDirOptions): Promise<PreparedSession> {
    await this.settled(sessionId);
    // Locked before the existence check: a concurrent DELETE either finished (404 here) or is refused.
    this.lock(sessionId);
    try {
      if (!(await this.belongsTo(join(this.root, sessionId), owner))) throw errors.sessionNotFound(sessionId);
      return await this.claimed(workdir, sessionId, { kind: 'resume', sessionId }, false, { sessionDir: join(this.root, sessionId), sessionId }, run);
    } catch (error) {
      this.busy.delete(sessionId);
      throw error;
    }
  }

  private async fork(workdir: string, owner: string, from: string, presetId: string | undefined, run: RunDirOptions): Promise<PreparedSession> {
    const sessionId = presetId === undefined ? randomUUID() : checkSessionUuid(presetId);
    await this.settled(from);
    // The forked run gets a copy of the original's transcripts in its own directory, so the original is
    // never written by it. The original is locked while it is copied: a run writing it meanwhile would leave
    // a half-written line in the copy.
    this.lock(from);
    try {
      if (!(await this.belongsTo(join(this.root, from), owner))) throw errors.sessionNotFound(from);
      this.lock(sessionId);
      const dir = join(this.root, sessionId);
      try {
        if (await pathExists(dir)) throw errors.internal(`session directory ${sessionId} already exists`);
        await this.createDir(sessionId, owner);
        return await this.claimed(workdir, sessionId, { kind: 'fork', fromSessionId: from, sessionId }, true, { sessionDir: join(this.root, from), sessionId: from }, run);
      } catch (error) {
        await rm(dir, { recursive: true, force: true });
        this.busy.delete(sessionId);
        throw error;
      }
    } finally {
      this.busy.delete(from);
    }
  }

  private async createDir(sessionId: string, owner: string): Promise<void> {
    const dir = join(this.root, sessionId);
    await mkdir(dir, { mode: 0o700 });
    await writeFile(join(dir, OWNER_FILE), owner, { mode: 0o600, flag: 'wx' });
  }

  private lock(sessionId: string): void {
    if (this.busy.has(sessionId)) throw errors.sessionBusy(sessionId);
    this.busy.add(sessionId);
  }

  /**
   * A session taken by a run, with the run's own configuration directory. When the run ends its transcript
   * is carried back; a session this run created (new, fork) that ends without a transcript (the run failed
   * before the engine wrote one) is removed again.
   */
  private async claimed(
    workdir: string,
    sessionId: string,
    engineSession: EngineSession,
    created: boolean,
    carry: { readonly sessionDir: string; readonly sessionId: string } | undefined,
    options: RunDirOptions,
  ): Promise<PreparedSession> {
    const dir = join(this.root, sessionId);
    // Named by the run id when there is one, so that a later process can find a run it follows again.
    const run: RunConfigDir = await this.runs.create(projectDirName(workdir), carry, options.runId, sessionId, options.diskBytes);
    return {
      sessionId,
      engineSession,
      mountPath: run.hostPath,
      ...onDisk(run),
      persistent: true,
      ...(engineSession.kind === 'new' ? { recordTitle: (title: string) => this.runs.noteTitle(run, title) } : {}),
      release: async () => {
        try {
          const carried = await this.runs.carryBack(run, sessionId, dir);
          if (carried.refused.length > 0) this.options.onCarryRefused?.(sessionId, carried.refused);
          if (created && (await transcriptFiles(dir, sessionId)).length === 0) await rm(dir, { recursive: true, force: true });
        } finally {
          await this.runs.remove(run).catch(() => undefined);
          this.busy.delete(sessionId);
        }
      },
    };
  }
}

// Session directories on disk: one per session id under SERVICE_AGENT_SESSIONS_DIR, holding the session's
// transcripts, written by Berth only. A run never mounts one: it gets a fresh engine configuration
// directory with copies of the transcripts (run-config-dirs.ts, under RUNS_DIR), and its own transcript is
// carried back when it ends, so nothing a run plants there changes how a later run of the session starts.
// Every path is built from an id that passed UUID_PATTERN first: `../../etc` never reaches the filesystem.
// The ids the methods take are checked ones (checkSessionUuid) or listed by ids().
import { constants } from 'node:fs';
import { mkdir, open, readdir, readFile, realpath, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { transcriptFiles } from '../../engine/transcript.js';
import { UUID_PATTERN } from '../../uuid.js';
import { isDirectory, pathExists } from './session-files.js';
import { checkSessionUuid } from './session-id.js';

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

export class SessionDirs {
  private root: string;

  constructor(dir: string) {
    this.root = dir;
  }

  /** Berth's (symlink-free, after init) path of the sessions directory. */
  get dir(): string {
    return this.root;
  }

  /** Where the runs' configuration directories live, below the sessions directory as `sessionsDir` names it. */
  static runsDirIn(sessionsDir: string): string {
    return join(sessionsDir, RUNS_DIR);
  }

  async init(): Promise<void> {
    await mkdir(this.root, { recursive: true, mode: 0o700 });
    // Transcripts are read only at lexical paths below a real one (engine/transcript.ts checks it).
    this.root = await realpath(this.root);
  }

  /** The directory of a session id as a caller gave it: 400 when it is not a UUID. */
  pathOf(sessionId: string): string {
    return join(this.root, checkSessionUuid(sessionId));
  }

  /** The directory of a checked or listed id. */
  at(id: string): string {
    return join(this.root, id);
  }

  /** The ids of the session directories there are. */
  async ids(): Promise<string[]> {
    const entries = await readdir(this.root, { withFileTypes: true });
    return entries.filter((entry) => entry.isDirectory() && UUID_PATTERN.test(entry.name)).map((entry) => entry.name);
  }

  async exists(id: string): Promise<boolean> {
    return isDirectory(this.at(id));
  }

  /** Whether anything at all stands at the session's path (a directory or not). */
  async occupied(id: string): Promise<boolean> {
    return pathExists(this.at(id));
  }

  /** Whether the session directory exists and was created by `owner`. */
  async belongsTo(id: string, owner: string): Promise<boolean> {
    const dir = this.at(id);
    if (!(await isDirectory(dir))) return false;
    const recorded = await readFile(join(dir, OWNER_FILE), 'utf8').catch((error: NodeJS.ErrnoException) => {
      if (error.code === 'ENOENT') return '';
      throw error;
    });
    return recorded === owner;
  }

  /** The recorded owner, undefined when it cannot be read. */
  async ownerOf(id: string): Promise<string | undefined> {
    return readFile(join(this.at(id), OWNER_FILE), 'utf8').catch(() => undefined);
  }

  /** Whether the session is a persistent agent's. */
  async isHidden(id: string): Promise<boolean> {
    return pathExists(join(this.at(id), HIDDEN_MARKER));
  }

  async hide(id: string): Promise<void> {
    // O_NOFOLLOW: the directory is writable from the container; a planted link must not be followed.
    const marker = await open(join(this.at(id), HIDDEN_MARKER), constants.O_WRONLY | constants.O_CREAT | constants.O_NOFOLLOW, 0o644);
    await marker.close();
  }

  /** Records a new owner of an existing session directory. */
  async assignOwner(id: string, owner: string): Promise<void> {
    // The directory is Berth's only; O_NOFOLLOW all the same, as for every write there.
    const file = await open(join(this.at(id), OWNER_FILE), constants.O_WRONLY | constants.O_TRUNC | constants.O_NOFOLLOW);
    try {
      await file.writeFile(owner);
    } finally {
      await file.close();
    }
  }

  /** Makes the session's directory, owned by `owner`; fails when it exists. */
  async create(id: string, owner: string): Promise<void> {
    const dir = this.at(id);
    await mkdir(dir, { mode: 0o700 });
    await writeFile(join(dir, OWNER_FILE), owner, { mode: 0o600, flag: 'wx' });
  }

  async remove(id: string): Promise<void> {
    await rm(this.at(id), { recursive: true, force: true });
  }

  /** Whether no run ever carried a transcript back into the session's directory. */
  async neverRan(id: string): Promise<boolean> {
    return (await transcriptFiles(this.at(id), id)).length === 0;
  }

  /** When the session's transcript for `workdir` was last written (carried back by Berth); undefined without one. */
  async transcriptTime(id: string, workdir: string): Promise<number | undefined> {
    try {
      return (await stat(join(this.at(id), 'projects', projectDirName(workdir), `${id}.jsonl`))).mtimeMs;
    } catch {
      return undefined;
    }
  }

  /** When the engine last wrote a transcript of the session (the directory's time while it has none). */
  async lastActivity(id: string): Promise<number> {
    const dir = this.at(id);
    const files = await transcriptFiles(dir, id);
    let lastActivityMs = files.length === 0 ? (await stat(dir)).mtimeMs : 0;
    for (const file of files) lastActivityMs = Math.max(lastActivityMs, (await stat(file)).mtimeMs);
    return lastActivityMs;
  }
}

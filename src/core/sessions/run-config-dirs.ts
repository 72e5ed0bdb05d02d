// Each run gets a fresh engine configuration directory (CLAUDE_CONFIG_DIR) that Berth creates and removes,
// never the session's own directory. The engine may write anything there — settings.json hooks, `env`
// entries, MCP servers in .claude.json, links to host files — and none of it reaches a later run: Berth
// carries in only the session's transcripts and carries back only this session's transcript files,
// read as untrusted input (engine/transcript.ts: no links, no FIFOs, a size limit).
import { randomBytes } from 'node:crypto';
import { chmod, lstat, mkdir, open, readdir, readFile, rename, rm } from 'node:fs/promises';
import { basename, dirname, join, relative } from 'node:path';
import { readListedFile, TranscriptRefused, transcriptFiles } from '../../engine/transcript.js';
import { withTitle } from '../../engine/session-title.js';
import { withoutWarmUpTurn } from '../../engine/warm-up.js';
import { DISK_IMAGE_SUFFIX, writablePaths, type RunDisks, type WritablePlace } from '../../runtime/run-disk.js';

export interface RunConfigDir {
  /** Berth's path of the directory. */
  readonly dir: string;
  /**
   * The project directories whose transcript may be carried back: those carried in, and the one the
   * engine writes for the run's workdir. A transcript planted under any other project name stays behind.
   */
  readonly projects: ReadonlySet<string>;
  /** The same directory as the container runtime sees the host (what is mounted). */
  readonly hostPath: string;
  /**
   * With a disk limit: the directory is the root of the run's own file system (runtime/run-disk.ts), and
   * these host paths on it are the container's other writable places (workdir, /tmp, /var/tmp, HOME).
   */
  readonly writable?: Readonly<Record<WritablePlace, string>>;
}

export interface CarriedBack {
  readonly files: number;
  /** Transcripts that were not carried back, and why (a link, not a regular file, over the limit). */
  readonly refused: readonly string[];
}

/** Suffix of the note beside a run's directory naming the session its transcript belongs to. */
const SIDECAR = '.session';

/** The note: the session, the project of the run's workdir, and the title a new session gets. */
interface SessionNote {
  readonly sessionId: string;
  readonly workdirProject: string;
  readonly title?: string;
}

export class RunConfigDirs {
  constructor(
    /** A real (symlink-free) path only Berth can write, e.g. <sessions>/.runs. */
    private readonly root: string,
    private readonly hostRoot: string,
    private readonly limitBytes: number,
    /** Gives each run a file system of its own size (container.disk); undefined: plain directories. */
    private readonly disks?: RunDisks,
  ) {}

  /**
   * At start: directories of runs cut off by a crash hold nothing a session needs and are removed, except
   * those of runs whose containers still run (`keep`, by run id), which this process follows again.
   * Answers the sessions whose transcripts a cut-off run's salvage carried back.
   */
  async init(keep: ReadonlySet<string> = new Set()): Promise<string[]> {
    await mkdir(this.root, { recursive: true, mode: 0o700 });
    const salvaged: string[] = [];
    for (const name of await readdir(this.root)) {
      if (name.endsWith(SIDECAR) || name.endsWith(DISK_IMAGE_SUFFIX) || keep.has(name)) continue;
      const sessionId = await this.salvage(name).catch(() => undefined);
      if (sessionId !== undefined) salvaged.push(sessionId);
      // A killed process's run disk: unmounted (its loop device freed) and its image removed.
      await this.disks?.release(join(this.root, name));
      await rm(join(this.root, name), { recursive: true, force: true });
      await rm(join(this.root, `${name}${SIDECAR}`), { force: true });
    }
    for (const name of await readdir(this.root)) {
      // A note whose directory is gone (or was just removed) has nothing left to say.
      if (name.endsWith(SIDECAR) && !keep.has(name.slice(0, -SIDECAR.length))) await rm(join(this.root, name), { force: true });
      // An image whose mount point is gone (a crash between making the image and mounting it).
      if (name.endsWith(DISK_IMAGE_SUFFIX) && !keep.has(name.slice(0, -DISK_IMAGE_SUFFIX.length))) await rm(join(this.root, name), { force: true });
    }
    // Run disks are unmounted everywhere at their release, also from other processes' copies of the mounts.
    await this.disks?.shareBelow?.(this.root);
    return salvaged;
  }

  /**
   * A run cut off by a crash of Berth (a sync run or a stream, whose HTTP connection is gone): what its
   * engine wrote is still carried into its session, so that the caller can resume the session.
   */
  private async salvage(name: string): Promise<string | undefined> {
    const note = JSON.parse(await readFile(join(this.root, `${name}${SIDECAR}`), 'utf8')) as SessionNote;
    const sessionDir = join(dirname(this.root), note.sessionId);
    const run = await this.existing(name, note.workdirProject, sessionDir);
    if (!run || !(await lstat(sessionDir).catch(() => undefined))?.isDirectory()) return undefined;
    const carried = await this.carryBack(run, note.sessionId, sessionDir);
    // A session the cut-off run created, before its engine wrote anything, holds nothing to resume.
    if ((await transcriptFiles(sessionDir, note.sessionId)).length === 0) {
      await rm(sessionDir, { recursive: true, force: true });
      return undefined;
    }
    return carried.files > 0 ? note.sessionId : undefined;
  }

  /** The directory a run of a previous process created, found again by its run id (see init). */
  async existing(name: string, workdirProject: string, sessionDir: string | undefined): Promise<RunConfigDir | undefined> {
    const dir = join(this.root, name);
    const info = await lstat(dir).catch(() => undefined);
    if (!info?.isDirectory()) return undefined;
    const projects = new Set([workdirProject]);
    if (sessionDir !== undefined) for (const project of await readdir(join(sessionDir, 'projects')).catch(() => [] as string[])) projects.add(project);
    return { dir, projects, hostPath: join(this.hostRoot, name), ...(await this.writableOf(name)) };
  }

  /** A fresh directory for one run, holding a copy of the transcripts of `carry` (resume, continue, fork). */
  /** `name`: the run's id, so that a later process can find the directory of a run it follows again. */
  async create(
    workdirProject: string,
    carry?: { readonly sessionDir: string; readonly sessionId: string },
    name = randomBytes(12).toString('hex'),
    keeps?: string,
    diskBytes?: number,
  ): Promise<RunConfigDir> {
    const dir = join(this.root, name);
    // Beside the directory, out of the container's reach: which session the run's transcript belongs to,
    // for a later start to carry it back should this process die during the run (see init).
    if (keeps !== undefined) await writeNote(join(this.root, `${name}${SIDECAR}`), { sessionId: keeps, workdirProject });
    // Written by whichever user the image runs as (uid 1000 in the default image, root in others, all
    // mapped to unprivileged host ids), so world-writable; only Berth can reach it on the host (0700 root).
    const onDisk = this.disks !== undefined && diskBytes !== undefined;
    if (onDisk) {
      await this.disks!.create(dir, diskBytes).catch(async (error: unknown) => {
        await rm(dir, { recursive: true, force: true });
        throw error;
      });
    } else {
      await mkdir(dir, { mode: 0o777 });
      await chmod(dir, 0o777);
    }
    const projects = new Set([workdirProject]);
    try {
      if (carry) {
        for (const file of await transcriptFiles(carry.sessionDir, carry.sessionId)) {
          await writeInto(dir, relative(carry.sessionDir, file), await readListedFile(file, this.limitBytes), { dirMode: 0o777, fileMode: 0o666 });
          projects.add(basename(dirname(file)));
        }
      }
    } catch (error) {
      await this.disks?.release(dir).catch(() => undefined);
      await rm(dir, { recursive: true, force: true });
      throw error;
    }
    const hostPath = join(this.hostRoot, name);
    return { dir, projects, hostPath, ...(onDisk ? { writable: writablePaths(hostPath) } : {}) };
  }

  /** A directory found again after a restart has a disk when its image is still there. */
  private async writableOf(name: string): Promise<{ writable?: Record<WritablePlace, string> }> {
    if (this.disks === undefined || !(await lstat(join(this.root, `${name}${DISK_IMAGE_SUFFIX}`)).catch(() => undefined))) return {};
    return { writable: writablePaths(join(this.hostRoot, name)) };
  }

  /**
   * Notes the title of the new session the run's transcript belongs to; carryBack() records it in the
   * transcript. Kept in the note, so that a run followed again, or salvaged, after a restart is titled too.
   */
  async noteTitle(run: RunConfigDir, title: string): Promise<void> {
    const path = `${run.dir}${SIDECAR}`;
    const note = JSON.parse(await readFile(path, 'utf8')) as SessionNote;
    await writeNote(path, { ...note, title });
  }

  /**
   * Copies this session's transcripts from a run's directory into the session's own (Berth-only) directory,
   * without a pooled engine's warm-up records (engine/warm-up.ts), and with the title noted for the session
   * (noteTitle) when a transcript has none.
   */
  async carryBack(run: RunConfigDir, sessionId: string, sessionDir: string): Promise<CarriedBack> {
    let files = 0;
    const refused: string[] = [];
    const note = await readFile(`${run.dir}${SIDECAR}`, 'utf8').then((text) => JSON.parse(text) as SessionNote, () => undefined);
    for (const file of await transcriptFiles(run.dir, sessionId)) {
      if (!run.projects.has(basename(dirname(file)))) {
        refused.push(`${relative(run.dir, file)} is not under the run's workdir or a project it resumed`);
        continue;
      }
      try {
        // A pooled engine's warm-up leaves records at the head of the transcript; a session never shows them.
        const transcript = withoutWarmUpTurn(await readListedFile(file, this.limitBytes));
        // An engine that never took a turn (a pooled one, discarded) leaves nothing of the session.
        if (transcript.length === 0) continue;
        const titled = note?.title !== undefined && note.sessionId === sessionId ? withTitle(transcript, note.title, sessionId) : transcript;
        await writeInto(sessionDir, relative(run.dir, file), titled, { dirMode: 0o700, fileMode: 0o600 });
        files++;
      } catch (error) {
        if (!(error instanceof TranscriptRefused) && (error as NodeJS.ErrnoException).code !== 'ELOOP') throw error;
        refused.push((error as Error).message);
      }
    }
    return { files, refused };
  }

  async remove(run: RunConfigDir): Promise<void> {
    // The disk first: unmounted, its contents and loop device go with it; then the empty mount point.
    await this.disks?.release(run.dir);
    // rm never follows links: whatever the run planted there goes with the directory, not its targets.
    await rm(run.dir, { recursive: true, force: true });
    await rm(`${run.dir}${SIDECAR}`, { force: true });
  }
}

/** Writes a run's note atomically: a note cut in half by a crash would lose the run's transcript at the next start. */
async function writeNote(path: string, note: SessionNote): Promise<void> {
  await writeInto(dirname(path), basename(path), Buffer.from(JSON.stringify(note)), { dirMode: 0o700, fileMode: 0o600 });
}

/** Writes `relativePath` (a transcript, `projects/<project>/<id>.jsonl`, or a note) below `root` atomically (temporary file, then rename). */
async function writeInto(root: string, relativePath: string, content: Buffer, modes: { dirMode: number; fileMode: number }): Promise<void> {
  const target = join(root, relativePath);
  let dir = root;
  for (const part of relative(root, dirname(target)).split('/').filter(Boolean)) {
    dir = join(dir, part);
    await mkdir(dir, { mode: modes.dirMode }).catch((error: NodeJS.ErrnoException) => {
      if (error.code !== 'EEXIST') throw error;
    });
    await chmod(dir, modes.dirMode);
  }
  const temporary = join(dirname(target), `.${basename(target)}.${randomBytes(6).toString('hex')}.tmp`);
  const handle = await open(temporary, 'wx', modes.fileMode);
  try {
    await handle.writeFile(content);
    await handle.chmod(modes.fileMode);
  } finally {
    await handle.close();
  }
  await rename(temporary, target);
}

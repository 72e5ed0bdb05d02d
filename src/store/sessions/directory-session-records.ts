// Session records in a node's own session directories (SERVICE_AGENT_SESSIONS_DIR), the layout the rest of
// Berth reads (docs/sessions.md "Storage"): `<id>/.berth-owner`, `<id>/.berth-agent` for an agent's session,
// `<id>/projects/<project>/<id>.jsonl` (mtime = when Berth wrote it), plus `<id>/.berth-shared` (version,
// node, title of the copy: what a node compares with the database's before it uses its own). Used with a
// shared database only: a session's record is read here at the end of a run and saved to PostgreSQL, and
// one this node lacks (or has an older version of) is written here from PostgreSQL before a run takes it.
// Ids reach this file checked (lower-case UUIDs); projects are checked against PROJECT_NAME before any path
// is built. Everything is written by Berth, 0700/0600; a record replaces a directory whole (built beside it,
// then renamed in), so a reader never sees half of one.
import { constants } from 'node:fs';
import { lstat, mkdir, open, readdir, readFile, rename, rm, stat, utimes } from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import { basename, dirname, join } from 'node:path';
import { readListedFile, transcriptFiles } from '../../engine/transcript.js';
import { UUID_PATTERN } from '../../uuid.js';
import { PROJECT_NAME, type SessionListing, type SessionRecord, type SessionRecordStore } from './session-record-store.js';

const OWNER_FILE = '.berth-owner';
const HIDDEN_MARKER = '.berth-agent';
/** Which version of the cluster's record this directory holds. */
const SHARED_FILE = '.berth-shared';

interface SharedNote {
  readonly version: number;
  readonly node: string;
  readonly title: string;
}

export class DirectorySessionRecords implements SessionRecordStore {
  private closed = false;
  /** Puts per id, one after the other: the version check and the swap of one must not interleave with another's. */
  private readonly writes = new Map<string, Promise<unknown>>();

  /** `root`: the sessions directory, a real (symlink-free) path; `limitBytes`: the largest transcript read. */
  constructor(
    private readonly root: string,
    private readonly limitBytes: number,
  ) {}

  async put(record: SessionRecord): Promise<boolean> {
    this.open();
    const id = checkedId(record.id);
    const previous = this.writes.get(id) ?? Promise.resolve();
    const turn = previous.catch(() => undefined).then(() => this.write(id, record));
    this.writes.set(id, turn);
    try {
      return await turn;
    } finally {
      if (this.writes.get(id) === turn) this.writes.delete(id);
    }
  }

  private async write(id: string, record: SessionRecord): Promise<boolean> {
    if ((await this.version(id)) >= record.version) return false;
    for (const transcript of record.transcripts) checkedProject(transcript.project);
    const staging = join(this.root, `.record-${randomBytes(8).toString('hex')}`);
    try {
      await mkdir(staging, { mode: 0o700 });
      await writeFileNew(join(staging, OWNER_FILE), Buffer.from(record.owner));
      if (record.hidden) await writeFileNew(join(staging, HIDDEN_MARKER), Buffer.alloc(0));
      await writeFileNew(join(staging, SHARED_FILE), Buffer.from(JSON.stringify({ version: record.version, node: record.node, title: record.title } satisfies SharedNote)));
      for (const transcript of record.transcripts) {
        const dir = join(staging, 'projects', transcript.project);
        await mkdir(dir, { recursive: true, mode: 0o700 });
        const file = join(dir, `${id}.jsonl`);
        await writeFileNew(file, transcript.content);
        const when = new Date(transcript.writtenAtMs);
        await utimes(file, when, when);
      }
      const target = join(this.root, id);
      const replaced = join(this.root, `.replaced-${randomBytes(8).toString('hex')}`);
      const had = await rename(target, replaced).then(() => true, (error: NodeJS.ErrnoException) => {
        if (error.code === 'ENOENT') return false;
        throw error;
      });
      await rename(staging, target);
      if (had) await rm(replaced, { recursive: true, force: true });
      return true;
    } finally {
      await rm(staging, { recursive: true, force: true });
    }
  }

  /**
   * Records that the directory now holds `version` of the cluster's record (saved from here), without
   * rewriting its transcripts. Not part of the contract: only a node's own copy has such a note.
   */
  async noteSaved(id: string, saved: { readonly version: number; readonly node: string; readonly title: string }): Promise<void> {
    this.open();
    const dir = join(this.root, checkedId(id));
    const temporary = join(dir, `${SHARED_FILE}.${randomBytes(6).toString('hex')}`);
    await writeFileNew(temporary, Buffer.from(JSON.stringify({ version: saved.version, node: saved.node, title: saved.title } satisfies SharedNote)));
    await rename(temporary, join(dir, SHARED_FILE));
  }

  async get(id: string): Promise<SessionRecord | undefined> {
    this.open();
    const dir = join(this.root, checkedId(id));
    if (!(await isRealDirectory(dir))) return undefined;
    const owner = await readFile(join(dir, OWNER_FILE), { encoding: 'utf8', flag: constants.O_RDONLY | constants.O_NOFOLLOW }).catch(() => '');
    const note = await this.note(dir);
    const transcripts = [];
    for (const file of await transcriptFiles(dir, id)) {
      const content = await readListedFile(file, this.limitBytes);
      transcripts.push({ project: basename(dirname(file)), content, writtenAtMs: Math.round((await stat(file)).mtimeMs) });
    }
    return { id, owner, hidden: await exists(join(dir, HIDDEN_MARKER)), title: note?.title ?? '', node: note?.node ?? '', version: note?.version ?? 0, transcripts };
  }

  async version(id: string): Promise<number> {
    this.open();
    return (await this.note(join(this.root, checkedId(id))))?.version ?? 0;
  }

  async list(owner: string): Promise<SessionListing[]> {
    this.open();
    const listed: SessionListing[] = [];
    for (const id of await this.ids()) {
      const dir = join(this.root, id);
      const recorded = await readFile(join(dir, OWNER_FILE), { encoding: 'utf8', flag: constants.O_RDONLY | constants.O_NOFOLLOW }).catch(() => undefined);
      if (recorded !== owner || (await exists(join(dir, HIDDEN_MARKER)))) continue;
      let lastActivityMs = 0;
      for (const file of await transcriptFiles(dir, id)) lastActivityMs = Math.max(lastActivityMs, Math.round((await stat(file)).mtimeMs));
      listed.push({ id, title: (await this.note(dir))?.title ?? '', lastActivityMs });
    }
    return listed.sort((a, b) => b.lastActivityMs - a.lastActivityMs || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  }

  async latestForProject(owner: string, project: string): Promise<string | undefined> {
    this.open();
    checkedProject(project);
    let best: { id: string; at: number } | undefined;
    for (const id of await this.ids()) {
      const dir = join(this.root, id);
      const recorded = await readFile(join(dir, OWNER_FILE), { encoding: 'utf8', flag: constants.O_RDONLY | constants.O_NOFOLLOW }).catch(() => undefined);
      if (recorded !== owner || (await exists(join(dir, HIDDEN_MARKER)))) continue;
      const file = await lstat(join(dir, 'projects', project, `${id}.jsonl`)).catch(() => undefined);
      if (!file?.isFile()) continue;
      const at = Math.round(file.mtimeMs);
      if (!best || at > best.at || (at === best.at && id < best.id)) best = { id, at };
    }
    return best?.id;
  }

  async remove(id: string): Promise<void> {
    this.open();
    await rm(join(this.root, checkedId(id)), { recursive: true, force: true });
  }

  close(): void {
    this.closed = true;
  }

  private open(): void {
    if (this.closed) throw new Error('the session records were closed');
  }

  private async ids(): Promise<string[]> {
    const entries = await readdir(this.root, { withFileTypes: true });
    return entries.filter((entry) => entry.isDirectory() && UUID_PATTERN.test(entry.name)).map((entry) => entry.name);
  }

  private async note(dir: string): Promise<SharedNote | undefined> {
    const text = await readFile(join(dir, SHARED_FILE), { encoding: 'utf8', flag: constants.O_RDONLY | constants.O_NOFOLLOW }).catch(() => undefined);
    if (text === undefined) return undefined;
    try {
      const note = JSON.parse(text) as SharedNote;
      return Number.isSafeInteger(note.version) ? note : undefined;
    } catch {
      return undefined;
    }
  }
}

function checkedId(id: string): string {
  if (!UUID_PATTERN.test(id) || id !== id.toLowerCase()) throw new Error(`session id "${id}" is not a lower-case UUID`);
  return id;
}

function checkedProject(project: string): string {
  if (!PROJECT_NAME.test(project)) throw new Error(`transcript project "${project}" is not a project directory name`);
  return project;
}

async function isRealDirectory(path: string): Promise<boolean> {
  return (await lstat(path).catch(() => undefined))?.isDirectory() ?? false;
}

async function exists(path: string): Promise<boolean> {
  return (await lstat(path).catch(() => undefined)) !== undefined;
}

/** A new file of Berth's (0600, never through a link), written whole. */
async function writeFileNew(path: string, content: Buffer): Promise<void> {
  const handle = await open(path, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
  try {
    await handle.writeFile(content);
  } finally {
    await handle.close();
  }
}

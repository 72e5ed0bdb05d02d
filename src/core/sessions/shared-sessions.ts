// Sessions that survive their node (issue 26): with a shared database, each session's record (owner, agent's
// or not, title, transcripts) is copied between this node's session directories and PostgreSQL
// (store/sessions/). At the end of every run the node's copy is saved as the next version; before a run or a
// read takes a session, a newer version in the database replaces the node's copy (or makes it, when the
// session was last run elsewhere), and a copy of a session deleted elsewhere is dropped. Listings and
// `continue`'s choice are answered by the database, so every node shows every session of the caller.
import type { DirectorySessionRecords } from '../../store/sessions/directory-session-records.js';
import type { SessionListing, SessionRecordStore, SessionTranscript } from '../../store/sessions/session-record-store.js';

export interface SharedSessionsOptions {
  /** This node's session directories, as records. */
  readonly local: DirectorySessionRecords;
  /** The cluster's copy (PostgreSQL). */
  readonly shared: SessionRecordStore;
  /** SERVICE_NODE_NAME: recorded with each save. */
  readonly node: string;
  readonly log: (details: object, message: string) => void;
}

export class SharedSessions {
  constructor(private readonly options: SharedSessionsOptions) {}

  /**
   * Brings this node's copy of the session up to the database's: made or replaced when the database holds a
   * later version, removed when the database no longer has a session this node's copy was saved to (it was
   * deleted on another node). A copy never saved (a new session whose first run has not ended) is kept.
   * The caller holds the session (or only reads it).
   */
  async restore(id: string): Promise<void> {
    const { local, shared } = this.options;
    const [sharedVersion, localVersion] = await Promise.all([shared.version(id), local.version(id)]);
    if (sharedVersion === 0) {
      if (localVersion > 0) await local.remove(id);
      return;
    }
    if (sharedVersion <= localVersion) return;
    const record = await shared.get(id);
    if (record === undefined) return;
    await local.put(record);
    this.options.log({ sessionId: id, version: record.version, from: record.node }, 'session restored from the shared database');
  }

  /**
   * Saves this node's copy of the session (after a run carried its transcript back) as the next version. A
   * session another node saved meanwhile (two runs of it at once, on two nodes) keeps that node's version:
   * this run's turn stays in this node's copy only, which the next restore here replaces, and it is logged.
   */
  async save(id: string): Promise<void> {
    const { local, shared, node } = this.options;
    const record = await local.get(id);
    if (record === undefined || record.transcripts.length === 0) return;
    const next = { ...record, title: titleOf(record.transcripts), node, version: record.version + 1 };
    if (await shared.put(next)) {
      await local.noteSaved(id, next);
      return;
    }
    this.options.log({ sessionId: id, version: next.version }, 'another node saved this session meanwhile (two runs of it at once): this run\'s transcript was not saved to the shared database');
  }

  /** Whether this node's copy of the session was ever saved to (or restored from) the database. */
  async savedHere(id: string): Promise<boolean> {
    return (await this.options.local.version(id)) > 0;
  }

  /** Removes the session from the database (it was deleted here). */
  async remove(id: string): Promise<void> {
    await this.options.shared.remove(id);
  }

  async list(owner: string): Promise<SessionListing[]> {
    return this.options.shared.list(owner);
  }

  async latestForProject(owner: string, project: string): Promise<string | undefined> {
    return this.options.shared.latestForProject(owner, project);
  }
}

/** The session's title: the last `custom-title` record of its transcripts (as engine/transcript.ts reads it), '' when none. */
function titleOf(transcripts: readonly SessionTranscript[]): string {
  let title = '';
  for (const transcript of [...transcripts].sort((a, b) => a.writtenAtMs - b.writtenAtMs)) {
    for (const line of transcript.content.toString('utf8').split('\n')) {
      if (!line.includes('"custom-title"')) continue;
      try {
        const record = JSON.parse(line) as { type?: unknown; customTitle?: unknown };
        if (record.type === 'custom-title' && typeof record.customTitle === 'string') title = record.customTitle;
      } catch {
        // A line cut off by a crash.
      }
    }
  }
  return title;
}

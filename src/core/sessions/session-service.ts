// The sessions use cases behind /sessions: list with titles, read a transcript as messages (paged or
// one by id), delete. Everything is read from the engine's own files in the session's directory.
import { stat } from 'node:fs/promises';
import { errors } from '../../errors.js';
import { readTranscript, readTranscriptFile, sessionTitle, transcriptFiles } from '../../engine/transcript.js';
import { transcriptMessages, type TranscriptMessage } from '../../engine/transcript-messages.js';
import type { SessionStore } from './session-store.js';
import { checkSessionUuid } from './session-id.js';
import { UUID_PATTERN } from '../../uuid.js';
import type { Caller } from '../auth/caller.js';

export const DEFAULT_PAGE_SIZE = 50;

/** A session's stack as GET /sessions shows it (core/compose/stacks.ts gives it). */
export interface StackView {
  readonly services: readonly string[];
  readonly in_use: boolean;
  readonly last_used_at: string;
}

export interface SessionSummary {
  readonly id: string;
  readonly title: string;
  /** The session's live compose stack, when it has one. */
  readonly stack?: StackView;
}

export interface MessagePage {
  readonly messages: readonly TranscriptMessage[];
  readonly total: number;
  /** The page size actually applied (the requested limit, clamped to the maximum). */
  readonly limit: number;
  readonly offset: number;
  /** Whether messages follow this page. */
  readonly has_more: boolean;
}

export interface SessionServiceDependencies {
  readonly store: SessionStore;
  /** Largest page of messages (SERVICE_SESSIONS_MAX_PAGE_SIZE); larger limits are clamped to it. */
  readonly maxPageSize: number;
  /** Called before a session's directory is removed: its compose stack goes with it. */
  readonly teardown?: (sessionId: string) => Promise<void>;
  /** The session's live compose stack, if any. */
  readonly stackOf?: (sessionId: string) => StackView | undefined;
}

/**
 * A session id taken from a URL path: an id that is not a UUID names no session, so it is a 404 like any
 * other unknown id (clients expect that), and it never reaches the filesystem.
 */
function knownSessionId(sessionId: string): string {
  if (!UUID_PATTERN.test(sessionId)) throw errors.sessionNotFound(sessionId);
  return checkSessionUuid(sessionId);
}

export class SessionService {
  /** Titles by transcript file, valid while the file's size and mtime are unchanged. */
  private readonly titles = new Map<string, { size: number; mtimeMs: number; title: string }>();

  constructor(private readonly deps: SessionServiceDependencies) {}

  /** Visible sessions, most recently active first, each with its title ('' when none). */
  async list(caller: Caller): Promise<SessionSummary[]> {
    const stored = await this.deps.store.list(caller.owner);
    const seen = new Set<string>();
    const sessions = await Promise.all(
      stored.map(async (session) => {
        const stack = this.deps.stackOf?.(session.id);
        const title = session.title ?? (await this.title(session.dir, session.id, seen));
        return { id: session.id, title, ...(stack ? { stack } : {}) };
      }),
    );
    for (const file of this.titles.keys()) if (!seen.has(file)) this.titles.delete(file);
    return sessions;
  }

  /** A page of the session's messages in conversation order; limit defaults to 50 and is clamped to the maximum. */
  async messages(sessionId: string, paging: { limit?: number; offset?: number }, caller: Caller): Promise<MessagePage> {
    const limit = Math.min(paging.limit ?? DEFAULT_PAGE_SIZE, this.deps.maxPageSize);
    const offset = paging.offset ?? 0;
    if (!Number.isInteger(limit) || limit < 0) throw errors.invalid('limit must be a whole number ≥ 0');
    if (!Number.isInteger(offset) || offset < 0) throw errors.invalid('offset must be a whole number ≥ 0');
    const all = await this.allMessages(sessionId, caller);
    return { messages: all.slice(offset, offset + limit), total: all.length, limit, offset, has_more: offset + limit < all.length };
  }

  async message(sessionId: string, messageId: string, caller: Caller): Promise<TranscriptMessage> {
    const found = (await this.allMessages(sessionId, caller)).find((message) => message.id === messageId.toLowerCase());
    if (!found) throw errors.notFound(`message ${messageId} of session ${sessionId.toLowerCase()}`);
    return found;
  }

  /** Removes the session: 404 when unknown, 409 while a run or agent is using it. */
  async delete(sessionId: string, caller: Caller): Promise<{ success: true; session_id: string }> {
    const id = knownSessionId(sessionId);
    await this.deps.store.remove(id, caller.owner, this.deps.teardown);
    return { success: true, session_id: id };
  }

  private async allMessages(sessionId: string, caller: Caller): Promise<TranscriptMessage[]> {
    const id = knownSessionId(sessionId);
    if (!(await this.deps.store.isVisible(id, caller.owner))) throw errors.sessionNotFound(id);
    return transcriptMessages(await readTranscript(this.deps.store.pathOf(id), id));
  }

  private async title(dir: string, sessionId: string, seen: Set<string>): Promise<string> {
    let title = '';
    for (const file of await transcriptFiles(dir, sessionId)) {
      seen.add(file);
      const info = await stat(file).catch(() => undefined);
      if (!info) continue;
      let cached = this.titles.get(file);
      if (!cached || cached.size !== info.size || cached.mtimeMs !== info.mtimeMs) {
        cached = { size: info.size, mtimeMs: info.mtimeMs, title: sessionTitle(await readTranscriptFile(file).catch(() => [])) };
        this.titles.set(file, cached);
      }
      title = cached.title || title;
    }
    return title;
  }
}

// Sessions: the stored conversations runs create. Listing, a session's messages (a page, or all of them
// through paging), one message, and deletion.

import { answer, type Api } from './api.js';
import { pages } from './paging.js';
import type { CallOptions, DeletedSession, Message, MessagePage, MessageQuery, Session, SessionList } from './types.js';

export class Sessions {
  constructor(private readonly api: Api) {}

  /** The caller's sessions, most recently active first. */
  async list(options: CallOptions = {}): Promise<SessionList> {
    return answer(await this.api.GET('/sessions', { signal: options.signal }));
  }

  /** Each of the caller's sessions (GET /sessions answers them all at once, so this is one request). */
  async *all(options: CallOptions = {}): AsyncGenerator<Session, void, undefined> {
    yield* (await this.list(options)).sessions;
  }

  /** One page of a session's messages, in conversation order. */
  async messages(id: string, query: MessageQuery = {}, options: CallOptions = {}): Promise<MessagePage> {
    return answer(await this.api.GET('/sessions/{id}/messages', { params: { path: { id }, query }, signal: options.signal }));
  }

  /**
   * Every message of a session from `query.offset` on, fetched `query.limit` at a time (Berth's default
   * page size, and at most its SERVICE_SESSIONS_MAX_PAGE_SIZE).
   */
  async *allMessages(id: string, query: MessageQuery = {}, options: CallOptions = {}): AsyncGenerator<Message, void, undefined> {
    yield* pages(async (offset) => {
      const page = await this.messages(id, { ...query, offset }, options);
      return { items: page.messages, hasMore: page.has_more };
    }, query.offset ?? 0);
  }

  async message(id: string, messageId: string, options: CallOptions = {}): Promise<Message> {
    return answer(await this.api.GET('/sessions/{id}/messages/{message_id}', { params: { path: { id, message_id: messageId } }, signal: options.signal }));
  }

  /** Deletes a session and its files (409 BerthError while a run or agent uses it). */
  async delete(id: string, options: CallOptions = {}): Promise<DeletedSession> {
    return answer(await this.api.DELETE('/sessions/{id}', { params: { path: { id } }, signal: options.signal }));
  }
}

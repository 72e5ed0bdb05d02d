// The event log in one SQLite file (<SERVICE_DATA_DIR>/events.db). Every engine output line of an agent is an
// append, so commits are not fsynced one by one (synchronous NORMAL, WAL): a killed process loses nothing
// committed, a power loss may lose the last moments. The count bound is kept at append time, cheaply (one
// stream's rows past its limit, every PRUNE_EVERY appends of that stream); the age bound by prune().
import type Database from 'better-sqlite3';
import { openDatabase } from '../sqlite.js';
import type { EventLog, EventRetention, EventsAfter, StoredEvent } from './event-log.js';

const MIGRATIONS = new URL('./migrations/', import.meta.url);

/**
 * A stream is pruned to its bounds once every this many appends, or once it has been appended a quarter of
 * its byte bound since the last pruning (so it holds at most this many extra events, or 1.25 times its bytes
 * plus one event).
 */
const PRUNE_EVERY = 64;
/** after() answers at most this many events per call unless asked for fewer. */
const DEFAULT_READ_LIMIT = 10_000;

interface EventRow {
  id: number;
  stream: string;
  type: string;
  data: string;
  at_ms: number;
}

function toEvent(row: EventRow): StoredEvent {
  return { id: row.id, stream: row.stream, type: row.type, data: JSON.parse(row.data) as Record<string, unknown>, atMs: row.at_ms };
}

export class SqliteEventLog implements EventLog {
  private readonly db: Database.Database;
  private readonly sincePrune = new Map<string, { appends: number; bytes: number }>();
  private readonly statements;

  constructor(path: string, private readonly retention: EventRetention) {
    this.db = openDatabase(path, MIGRATIONS, { synchronous: 'NORMAL' });
    const db = this.db;
    this.statements = {
      insert: db.prepare('INSERT INTO events (stream, type, data, at_ms) VALUES (?, ?, ?, ?)'),
      after: db.prepare('SELECT id, stream, type, data, at_ms FROM events WHERE stream = ? AND id > ? ORDER BY id LIMIT ?'),
      pruned: db.prepare('SELECT through FROM event_streams_pruned WHERE stream = ?'),
      // The id of the oldest event to keep: the maxPerStream-th newest.
      cutoff: db.prepare('SELECT id FROM events WHERE stream = ? ORDER BY id DESC LIMIT 1 OFFSET ?'),
      // The oldest event that still fits the byte bound, counting from the newest (which is always kept).
      byteCutoff: db.prepare(
        'SELECT MIN(id) AS id FROM (SELECT id, SUM(LENGTH(CAST(data AS BLOB))) OVER (ORDER BY id DESC) AS total FROM events WHERE stream = ?) WHERE total <= ? OR id = (SELECT MAX(id) FROM events WHERE stream = ?)',
      ),
      streamsOverBytes: db.prepare('SELECT stream FROM events GROUP BY stream HAVING SUM(LENGTH(CAST(data AS BLOB))) > ?'),
      recordPruned: db.prepare(
        'INSERT INTO event_streams_pruned (stream, through) VALUES (?, ?) ON CONFLICT (stream) DO UPDATE SET through = MAX(through, excluded.through)',
      ),
      deleteBelow: db.prepare('DELETE FROM events WHERE stream = ? AND id < ?'),
      maxBelow: db.prepare('SELECT MAX(id) AS through FROM events WHERE stream = ? AND id < ?'),
      oldStreams: db.prepare('SELECT stream, MAX(id) AS through FROM events WHERE at_ms < ? GROUP BY stream'),
      deleteOld: db.prepare('DELETE FROM events WHERE at_ms < ?'),
      streamsOverCount: db.prepare('SELECT stream FROM events GROUP BY stream HAVING COUNT(*) > ?'),
      removeEvents: db.prepare('DELETE FROM events WHERE stream = ?'),
      removePruned: db.prepare('DELETE FROM event_streams_pruned WHERE stream = ?'),
    };
  }

  async append(stream: string, type: string, data: Readonly<Record<string, unknown>>, atMs: number): Promise<StoredEvent> {
    const json = JSON.stringify(data);
    const id = Number(this.statements.insert.run(stream, type, json, atMs).lastInsertRowid);
    const since = this.sincePrune.get(stream) ?? { appends: 0, bytes: 0 };
    since.appends += 1;
    since.bytes += Buffer.byteLength(json);
    if (since.appends >= PRUNE_EVERY || since.bytes >= this.retention.maxBytesPerStream / 4) {
      this.sincePrune.delete(stream);
      this.pruneStream(stream);
    } else {
      this.sincePrune.set(stream, since);
    }
    return { id, stream, type, data, atMs };
  }

  async after(stream: string, afterId: number, limit = DEFAULT_READ_LIMIT): Promise<EventsAfter> {
    // One read transaction: the pruning record and the rows are of the same moment.
    return this.db.transaction((): EventsAfter => {
      const rows = this.statements.after.all(stream, afterId, limit) as EventRow[];
      const pruned = (this.statements.pruned.get(stream) as { through: number } | undefined)?.through;
      return { events: rows.map(toEvent), lostThrough: pruned !== undefined && pruned > afterId ? pruned : undefined };
    })();
  }

  async prune(nowMs: number): Promise<number> {
    return this.db.transaction(() => {
      let removed = 0;
      const cutoffMs = nowMs - this.retention.maxAgeMs;
      for (const { stream, through } of this.statements.oldStreams.all(cutoffMs) as { stream: string; through: number }[]) {
        this.statements.recordPruned.run(stream, through);
      }
      removed += this.statements.deleteOld.run(cutoffMs).changes;
      const over = new Set([
        ...(this.statements.streamsOverCount.all(this.retention.maxPerStream) as { stream: string }[]).map((row) => row.stream),
        ...(this.statements.streamsOverBytes.all(this.retention.maxBytesPerStream) as { stream: string }[]).map((row) => row.stream),
      ]);
      for (const stream of over) removed += this.pruneStream(stream);
      return removed;
    })();
  }

  async removeStream(stream: string): Promise<void> {
    this.db.transaction(() => {
      this.statements.removeEvents.run(stream);
      this.statements.removePruned.run(stream);
    })();
    this.sincePrune.delete(stream);
  }

  async close(): Promise<void> {
    this.db.close();
  }

  /** Keeps the stream's newest events within maxPerStream and maxBytesPerStream; answers how many were removed. */
  private pruneStream(stream: string): number {
    return this.db.transaction(() => {
      const byCount = (this.statements.cutoff.get(stream, this.retention.maxPerStream - 1) as { id: number } | undefined)?.id;
      const byBytes = (this.statements.byteCutoff.get(stream, this.retention.maxBytesPerStream, stream) as { id: number | null }).id;
      const cutoff = Math.max(byCount ?? 0, byBytes ?? 0);
      if (cutoff === 0) return 0;
      const through = (this.statements.maxBelow.get(stream, cutoff) as { through: number | null }).through;
      if (through === null) return 0;
      this.statements.recordPruned.run(stream, through);
      return this.statements.deleteBelow.run(stream, cutoff).changes;
    })();
  }
}

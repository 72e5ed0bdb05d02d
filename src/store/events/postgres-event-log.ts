// The event log on PostgreSQL, shared by every node (issue 26): a client reconnecting through any node is sent
// what it missed. As in the SQLite file, the count bound is kept at append time (one stream's rows past its
// limit, every PRUNE_EVERY appends of that stream, counted by the stream's one writer) and the age bound by
// prune(), which every node calls: pruning transactions take one advisory lock, so two nodes pruning at once
// wait for each other instead of deadlocking on the same rows.
//
// Ids come from an identity sequence: unique and growing in the order appends reach the database. Appends to one
// stream come from its one writer, awaited in order (event-log.ts), so within a stream commit order is id order
// and a reader that saw id n never later finds a new event below n.
import { advisoryLockKey } from '../postgres/advisory-locks.js';
import type { PostgresDatabase, Queryable } from '../postgres/database.js';
import { StoreQueries } from '../postgres/database.js';
import { applyPostgresMigrations } from '../postgres/migrate.js';
import type { EventLog, EventRetention, EventsAfter, StoredEvent } from './event-log.js';

const MIGRATIONS = new URL('./migrations/postgres/', import.meta.url);

/**
 * A stream is pruned to its bounds once every this many appends, or once it was appended a quarter of its byte
 * bound since the last pruning (as the SQLite file does).
 */
const PRUNE_EVERY = 64;
/** after() answers at most this many events per call unless asked for fewer. */
const DEFAULT_READ_LIMIT = 10_000;

const LOCK_PRUNING = 'SELECT pg_advisory_xact_lock($1, $2)';

/**
 * Keeps the stream's newest events within $2 events and $3 bytes of data (the newest one whatever its size):
 * deletes the older ones and records the highest deleted id, in one statement. The cutoff is the younger of
 * the $2-th newest id and the oldest id that still fits the bytes; nothing is deleted while both fit.
 */
const PRUNE_STREAM = `
  WITH by_count AS (SELECT id FROM events WHERE stream = $1 ORDER BY id DESC LIMIT 1 OFFSET $2 - 1),
  by_bytes AS (
    SELECT min(id) AS id FROM (
      SELECT id, sum(octet_length(data::text)) OVER (ORDER BY id DESC) AS total FROM events WHERE stream = $1
    ) AS running
    WHERE total <= $3 OR id = (SELECT max(id) FROM events WHERE stream = $1)
  ),
  cutoff AS (SELECT GREATEST((SELECT id FROM by_count), (SELECT id FROM by_bytes)) AS id),
  gone AS (DELETE FROM events WHERE stream = $1 AND id < (SELECT id FROM cutoff) RETURNING id),
  recorded AS (
    INSERT INTO event_streams_pruned (stream, through) SELECT $1, max(id) FROM gone HAVING count(*) > 0
    ON CONFLICT (stream) DO UPDATE SET through = GREATEST(event_streams_pruned.through, excluded.through)
  )
  SELECT count(*) AS removed FROM gone`;

/** Deletes every stream's events older than $1 (epoch ms), recording per stream the highest deleted id. */
const PRUNE_BY_AGE = `
  WITH gone AS (DELETE FROM events WHERE at_ms < $1 RETURNING stream, id),
  recorded AS (
    INSERT INTO event_streams_pruned (stream, through) SELECT stream, max(id) FROM gone GROUP BY stream
    ON CONFLICT (stream) DO UPDATE SET through = GREATEST(event_streams_pruned.through, excluded.through)
  )
  SELECT count(*) AS removed FROM gone`;

/** One stream's events after an id, and its pruning record, in one statement: both of the same moment. */
const EVENTS_AFTER = `
  SELECT pruned.through, e.id, e.type, e.data, e.at_ms
  FROM (SELECT 1) AS one
  LEFT JOIN event_streams_pruned AS pruned ON pruned.stream = $1
  LEFT JOIN LATERAL (
    SELECT id, type, data::text AS data, at_ms FROM events WHERE stream = $1 AND id > $2 ORDER BY id LIMIT $3
  ) AS e ON true
  ORDER BY e.id`;

interface AfterRow {
  through: number | null;
  id: number | null;
  type: string | null;
  data: string | null;
  at_ms: number | null;
}

export class PostgresEventLog implements EventLog {
  private readonly sincePrune = new Map<string, { appends: number; bytes: number }>();

  private constructor(private readonly db: StoreQueries, private readonly retention: EventRetention) {}

  /** Applies the store's pending migrations to the shared database, then answers the log. */
  static async open(database: PostgresDatabase, retention: EventRetention): Promise<PostgresEventLog> {
    await applyPostgresMigrations(database, 'events', MIGRATIONS);
    return new PostgresEventLog(new StoreQueries(database, 'events'), retention);
  }

  async append(stream: string, type: string, data: Readonly<Record<string, unknown>>, atMs: number): Promise<StoredEvent> {
    const [row] = await this.db.query<{ id: number }>(
      'INSERT INTO events (stream, type, data, at_ms) VALUES ($1, $2, $3, $4) RETURNING id',
      [stream, type, JSON.stringify(data), atMs],
    );
    const since = this.sincePrune.get(stream) ?? { appends: 0, bytes: 0 };
    since.appends += 1;
    since.bytes += Buffer.byteLength(JSON.stringify(data));
    if (since.appends >= PRUNE_EVERY || since.bytes >= this.retention.maxBytesPerStream / 4) {
      this.sincePrune.delete(stream);
      await this.db.transaction(async (tx) => {
        await tx.query(LOCK_PRUNING, advisoryLockKey('eventPrune'));
        await pruneStream(tx, stream, this.retention);
      });
    } else {
      this.sincePrune.set(stream, since);
    }
    return { id: row!.id, stream, type, data, atMs };
  }

  async after(stream: string, afterId: number, limit = DEFAULT_READ_LIMIT): Promise<EventsAfter> {
    const rows = await this.db.query<AfterRow>(EVENTS_AFTER, [stream, afterId, limit]);
    const through = rows[0]?.through ?? null;
    const events = rows
      .filter((row) => row.id !== null)
      .map((row): StoredEvent => ({ id: row.id!, stream, type: row.type!, data: JSON.parse(row.data!) as Record<string, unknown>, atMs: row.at_ms! }));
    return { events, lostThrough: through !== null && through > afterId ? through : undefined };
  }

  async prune(nowMs: number): Promise<number> {
    return this.db.transaction(async (tx) => {
      await tx.query(LOCK_PRUNING, advisoryLockKey('eventPrune'));
      const [aged] = await tx.query<{ removed: number }>(PRUNE_BY_AGE, [nowMs - this.retention.maxAgeMs]);
      let removed = aged!.removed;
      const crowded = await tx.query<{ stream: string }>(
        'SELECT stream FROM events GROUP BY stream HAVING count(*) > $1 OR sum(octet_length(data::text)) > $2',
        [this.retention.maxPerStream, this.retention.maxBytesPerStream],
      );
      for (const { stream } of crowded) removed += await pruneStream(tx, stream, this.retention);
      return removed;
    });
  }

  async removeStream(stream: string): Promise<void> {
    await this.db.transaction(async (tx) => {
      await tx.query(LOCK_PRUNING, advisoryLockKey('eventPrune'));
      await tx.query('DELETE FROM events WHERE stream = $1', [stream]);
      await tx.query('DELETE FROM event_streams_pruned WHERE stream = $1', [stream]);
    });
    this.sincePrune.delete(stream);
  }

  /** Closes this log; the shared database stays open for the other stores (its opener closes it). */
  async close(): Promise<void> {
    this.db.close();
  }
}

async function pruneStream(tx: Queryable, stream: string, retention: EventRetention): Promise<number> {
  const [row] = await tx.query<{ removed: number }>(PRUNE_STREAM, [stream, retention.maxPerStream, retention.maxBytesPerStream]);
  return row!.removed;
}

// Cluster-wide places on PostgreSQL (slot-store.ts). An acquisition is one transaction: a transaction advisory
// lock per (kind, caller) first, then the count of that caller's places on live nodes and the insert in one
// statement. The lock is what makes the count exact: under READ COMMITTED a statement sees what committed
// before it began, so two nodes counting at once without it would both see N-1 and both insert. With it the
// second waits for the first's commit, and its statement (begun after the lock) sees the first's row.
import { createHash } from 'node:crypto';
import type { PostgresDatabase } from '../postgres/database.js';
import { StoreQueries } from '../postgres/database.js';
import { applyPostgresMigrations } from '../postgres/migrate.js';
import { SLOT_LOCK_NAMESPACE } from '../postgres/advisory-locks.js';
import type { SlotKind, SlotStore } from './slot-store.js';

const MIGRATIONS = new URL('./migrations/postgres/', import.meta.url);

/** The advisory lock of one caller's places of one kind: 32 bits of a hash (a shared key only serialises two callers). */
export function slotLockKey(kind: SlotKind, caller: string): [number, number] {
  return [SLOT_LOCK_NAMESPACE, createHash('sha256').update(`${kind}\0${caller}`).digest().readInt32BE(0)];
}

export class PostgresSlotStore implements SlotStore {
  private constructor(
    private readonly db: StoreQueries,
    /** The node whose places these are (its SERVICE_NODE_NAME). */
    private readonly node: string,
  ) {}

  static async open(database: PostgresDatabase, node: string): Promise<PostgresSlotStore> {
    if (node === '') throw new Error('a PostgreSQL slot store needs the name of the node it is opened for');
    await applyPostgresMigrations(database, 'slots', MIGRATIONS);
    return new PostgresSlotStore(new StoreQueries(database, 'slots'), node);
  }

  async acquire(kind: SlotKind, caller: string, holder: string, limit: number): Promise<boolean> {
    return this.db.transaction(async (tx) => {
      await tx.query('SELECT pg_advisory_xact_lock($1, $2)', slotLockKey(kind, caller));
      const inserted = await tx.query(
        `INSERT INTO container_slots (holder, node, kind, caller)
         SELECT $1, $2, $3, $4
         WHERE (SELECT count(*) FROM container_slots s JOIN nodes n ON n.name = s.node
                WHERE s.kind = $3 AND s.caller = $4 AND n.released_at IS NULL AND n.expires_at > now()) < $5
         RETURNING holder`,
        [holder, this.node, kind, caller, limit],
      );
      return inserted.length === 1;
    });
  }

  async release(holder: string): Promise<void> {
    await this.db.query('DELETE FROM container_slots WHERE holder = $1', [holder]);
  }

  async clearNode(): Promise<number> {
    const [row] = await this.db.query<{ n: number }>(
      'WITH gone AS (DELETE FROM container_slots WHERE node = $1 RETURNING 1) SELECT count(*) AS n FROM gone',
      [this.node],
    );
    return row!.n;
  }

  async close(): Promise<void> {
    this.db.close();
  }
}

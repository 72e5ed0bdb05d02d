// One PostgreSQL database shared by every store of a node, through one connection pool (node-postgres, `pg`;
// docs/design/postgres-store.md says why that driver). The stores borrow it and never close it: whoever opens
// it (the composition root) closes it once, after the stores. A store queries through its own StoreQueries,
// which refuses work once that store is closed, as the SQLite stores do.
import pg from 'pg';

export interface PostgresDatabaseOptions {
  /** A postgres:// URL, or pg's connection settings (a unix socket directory as `host`, …). */
  readonly connection: string | pg.ClientConfig;
  /** Connections the pool opens at most (default 10). */
  readonly maxConnections?: number;
  /** How long a query waits for a free connection, or for a new one to open, before it fails (default 10 s). */
  readonly connectTimeoutMs?: number;
  /**
   * An idle connection failed (the server restarted, the network dropped). pg drops it from the pool and opens
   * a new one when needed; without a listener the error would end the process.
   */
  readonly onIdleError?: (error: Error) => void;
}

/** What a query runs on: the pool, or one connection inside a transaction. */
export interface Queryable {
  query<Row extends object>(sql: string, values?: readonly unknown[]): Promise<Row[]>;
}

const INT8_OID = 20;

/**
 * bigint columns (ids from sequences, byte counts, epoch milliseconds, count(*)) as numbers: pg answers them
 * as strings by default, since an int8 can exceed 2^53. Berth's never come near that; one that did is refused
 * rather than silently rounded.
 */
const TYPES: pg.CustomTypesConfig = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') => {
    if (oid === INT8_OID && format !== 'binary') {
      return (text: string) => {
        const value = Number(text);
        if (!Number.isSafeInteger(value)) throw new Error(`bigint ${text} is beyond JavaScript's safe integers`);
        return value;
      };
    }
    return pg.types.getTypeParser(oid, format);
  }) as pg.CustomTypesConfig['getTypeParser'],
};

function connectionSettings(connection: string | pg.ClientConfig): pg.ClientConfig {
  return typeof connection === 'string' ? { connectionString: connection } : connection;
}

export class PostgresDatabase implements Queryable {
  private readonly pool: pg.Pool;
  private ended: Promise<void> | undefined;

  constructor(options: PostgresDatabaseOptions) {
    this.pool = new pg.Pool({
      ...connectionSettings(options.connection),
      max: options.maxConnections ?? 10,
      connectionTimeoutMillis: options.connectTimeoutMs ?? 10_000,
      idleTimeoutMillis: 30_000,
      // A peer that vanished without closing (a lost host) is noticed by TCP keepalive, not after hours.
      keepAlive: true,
      application_name: 'berth',
      types: TYPES,
    });
    this.pool.on('error', (error) => options.onIdleError?.(error));
  }

  async query<Row extends object>(sql: string, values: readonly unknown[] = []): Promise<Row[]> {
    const result = await this.pool.query<Row>(sql, values as unknown[]);
    return result.rows;
  }

  /**
   * Runs `body` on one connection between BEGIN and COMMIT; any error rolls back and is rethrown. A connection
   * whose rollback fails is closed rather than handed to the next caller in an unknown state (pg also drops one
   * that broke on its own).
   */
  async transaction<T>(body: (tx: Queryable) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    let unusable: Error | undefined;
    try {
      await client.query('BEGIN');
      try {
        const result = await body(queryableOf(client));
        await client.query('COMMIT');
        return result;
      } catch (error) {
        await client.query('ROLLBACK').catch((rollbackError: Error) => {
          unusable = rollbackError;
        });
        throw error;
      }
    } finally {
      client.release(unusable);
    }
  }

  /**
   * Lends one connection for what must happen on the same session (session advisory locks, LISTEN). A body that
   * fails gives the connection back closed: its session may hold a lock or a half-done transaction.
   */
  async withConnection<T>(body: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    try {
      const result = await body(client);
      client.release();
      return result;
    } catch (error) {
      client.release(error instanceof Error ? error : new Error(String(error)));
      throw error;
    }
  }

  /** Closes every connection, once the queries under way have ended. Safe to call twice. */
  close(): Promise<void> {
    this.ended ??= this.pool.end();
    return this.ended;
  }
}

function queryableOf(client: pg.PoolClient): Queryable {
  return {
    async query<Row extends object>(sql: string, values: readonly unknown[] = []): Promise<Row[]> {
      return (await client.query<Row>(sql, values as unknown[])).rows;
    },
  };
}

/**
 * One store's way to the shared database: the same queries, refused once the store is closed, so that a closed
 * store fails loudly (the token blacklist must never answer "not blacklisted" after close) while the pool
 * goes on serving the other stores.
 */
export class StoreQueries implements Queryable {
  private closed = false;

  constructor(private readonly database: PostgresDatabase, private readonly store: string) {}

  async query<Row extends object>(sql: string, values?: readonly unknown[]): Promise<Row[]> {
    this.assertOpen();
    return this.database.query<Row>(sql, values);
  }

  async transaction<T>(body: (tx: Queryable) => Promise<T>): Promise<T> {
    this.assertOpen();
    return this.database.transaction(body);
  }

  close(): void {
    this.closed = true;
  }

  private assertOpen(): void {
    if (this.closed) throw new Error(`the PostgreSQL ${this.store} store is closed`);
  }
}

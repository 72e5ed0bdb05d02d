// Real Berths on one throw-away PostgreSQL (issue 26's two-node integration tests): what every node of such a
// test shares (one database, one JWT secret, the same named API tokens, authentication on, no pre-started
// engines unless a test asks), the callers' access tokens, one-off queries of the shared database, and the
// stop that checks PostgreSQL left nothing behind.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import type { TestBerth } from './berth.js';
import type { PostgresDatabaseAddress, TestPostgres } from './postgres.js';

/** Named callers with an API token each, and the access tokens one node issued them (valid on every node). */
export class ClusterCallers<Name extends string> {
  readonly jwtSecret = randomBytes(32).toString('hex');
  readonly apiTokens: ReadonlyMap<Name, string>;
  private readonly accessTokens = new Map<Name, string>();

  constructor(names: readonly Name[]) {
    this.apiTokens = new Map(names.map((name) => [name, `berth-test-${randomBytes(16).toString('hex')}`] as const));
  }

  /** The authentication settings every node needs alike. */
  get env(): Record<string, string> {
    return {
      SERVICE_AUTH_ENABLED: 'true',
      SERVICE_JWT_SECRET: this.jwtSecret,
      SERVICE_API_TOKENS: [...this.apiTokens].map(([caller, token]) => `${caller}:${token}`).join(','),
    };
  }

  /** Exchanges each caller's API token on `node` (client_id = the caller's name). */
  async signIn(node: TestBerth): Promise<void> {
    for (const [caller, apiToken] of this.apiTokens) {
      const issued = await node.request('POST', '/auth/token', { client_id: caller }, { authorization: `Bearer ${apiToken}` });
      assert.equal(issued.status, 200, JSON.stringify(issued.body));
      this.accessTokens.set(caller, issued.body.access_token as string);
    }
  }

  /** The caller's access token (after signIn). */
  token(caller: Name): string {
    const token = this.accessTokens.get(caller);
    if (token === undefined) throw new Error(`${caller} has not signed in`);
    return token;
  }

  /** The caller's Authorization header (after signIn). */
  as(caller: Name): Record<string, string> {
    return { authorization: `Bearer ${this.token(caller)}` };
  }
}

/** A node's environment: the shared database, its own name and port (its registered URL derives from it). */
export function clusterNodeEnv(
  database: PostgresDatabaseAddress,
  node: { readonly name: string; readonly port: number },
  callers: ClusterCallers<string>,
  settings: Record<string, string> = {},
): Record<string, string> {
  return {
    SERVICE_DATABASE_URL: database.url,
    SERVICE_ADDRESS: `127.0.0.1:${node.port}`,
    SERVICE_NODE_NAME: node.name,
    ...callers.env,
    SERVICE_POOL_SIZE: '0',
    SERVICE_AGENT_POOL_SIZE: '0',
    ...settings,
  };
}

/** One statement on the shared database, on a connection of its own (what the test reads beside Berth). */
export async function queryDatabase<Row extends pg.QueryResultRow>(database: PostgresDatabaseAddress, sql: string, params: unknown[] = []): Promise<Row[]> {
  const client = new pg.Client(database.config);
  await client.connect();
  try {
    return (await client.query<Row>(sql, params)).rows;
  } finally {
    await client.end();
  }
}

/** Stops the nodes still running, then PostgreSQL, and checks that none of its processes or files are left. */
export async function stopCluster(nodes: readonly (TestBerth | undefined)[], server: TestPostgres, alsoRemove?: () => Promise<void>): Promise<void> {
  try {
    await Promise.all(nodes.map((node) => node?.stop()));
  } finally {
    await server.stop();
    await alsoRemove?.();
  }
  assert.deepEqual(await server.leftovers(), [], 'no PostgreSQL process or directory is left');
}

// A throw-away PostgreSQL 15 server for tests: initdb into a temporary directory (on tmpfs when there is one) as
// the `postgres` system user (PostgreSQL refuses to run as root, and the tests run as root; as another user it
// runs as that user), started with pg_ctl on a private unix socket
// directory and a free port on 127.0.0.1, trust authentication on the socket (a password on TCP), fsync off
// (nothing here must survive a power loss). Every suite gets a fresh database. stop() ends the server with
// everything it started and removes the directory; leftovers() lists what would have leaked.
// PostgreSQL is installed by scripts/setup.sh (Debian 12's postgresql, version 15): a missing server fails the
// test rather than skipping it.
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chownSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';

const exec = promisify(execFile);

export const POSTGRES_BIN = '/usr/lib/postgresql/15/bin';
const SYSTEM_USER = 'postgres';

/** How a client reaches one database of the server. */
export interface PostgresDatabaseAddress {
  readonly name: string;
  /** For pg's Pool/Client: the unix socket, trust authentication. */
  readonly config: pg.ClientConfig;
  /** The same database over TCP with the superuser's password, as a service would be configured. */
  readonly url: string;
}

export interface TestPostgres {
  readonly dir: string;
  readonly socketDir: string;
  readonly port: number;
  /** The postmaster's process id. */
  readonly pid: number;
  /** Creates an empty database (named `prefix_<n>`) and answers how to reach it. */
  createDatabase(prefix?: string): Promise<PostgresDatabaseAddress>;
  /** Stops the server (immediately: it is thrown away) and removes its directory. Safe to call twice. */
  stop(): Promise<void>;
  /** What is left of this server: its processes, and its directory. Empty after stop(). */
  leftovers(): Promise<string[]>;
}

/** A TCP port on 127.0.0.1 free at the time of asking. */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

async function systemUserIds(): Promise<{ uid: number; gid: number }> {
  const [uid, gid] = await Promise.all([exec('id', ['-u', SYSTEM_USER]), exec('id', ['-g', SYSTEM_USER])]);
  return { uid: Number(uid.stdout.trim()), gid: Number(gid.stdout.trim()) };
}

const AS_ROOT = process.getuid?.() === 0;

/** Runs a program as the postgres system user when this process is root, else as this process's user. */
async function asPostgres(program: string, args: readonly string[]): Promise<void> {
  const command = program.startsWith('/') ? program : join(POSTGRES_BIN, program);
  if (AS_ROOT) await exec('runuser', ['-u', SYSTEM_USER, '--', command, ...args], { timeout: 60_000 });
  else await exec(command, args, { timeout: 60_000 });
}

/** Process ids whose parent is `pid`. */
async function childrenOf(pid: number): Promise<number[]> {
  const { stdout } = await exec('pgrep', ['-P', String(pid)]).catch(() => ({ stdout: '' }));
  return stdout.split('\n').filter(Boolean).map(Number);
}

/** Whether `pid` runs: a zombie does not (the postmaster, orphaned by pg_ctl, waits a while for init to reap it). */
function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

export async function startPostgres(): Promise<TestPostgres> {
  if (!existsSync(join(POSTGRES_BIN, 'initdb'))) {
    throw new Error(`PostgreSQL 15 is not installed (${POSTGRES_BIN}); scripts/setup.sh installs Debian's postgresql`);
  }
  // In memory when the host has a tmpfs: initdb, CREATE DATABASE and the removal at the end are then not
  // held up by a disk that other tests keep busy (removing a data directory from disk took seconds).
  const dir = mkdtempSync(join(existsSync('/dev/shm') ? '/dev/shm' : tmpdir(), 'berth-pg-'));
  const dataDir = join(dir, 'data');
  const socketDir = join(dir, 'socket');
  const password = randomBytes(18).toString('base64url');
  const postmasterPid = (): number | undefined => {
    try {
      return Number(readFileSync(join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]) || undefined;
    } catch {
      return undefined;
    }
  };
  // If start-up fails half-way, or this process ends without stop() (a crashed test), the server goes too:
  // SIGQUIT is the postmaster's immediate shutdown, which ends its children with it.
  const onExit = () => {
    const pid = postmasterPid();
    if (pid !== undefined && alive(pid)) process.kill(pid, 'SIGQUIT');
    rmSync(dir, { recursive: true, force: true });
  };
  process.once('exit', onExit);
  try {
    const passwordFile = join(dir, 'password');
    writeFileSync(passwordFile, password, { mode: 0o600 });
    if (AS_ROOT) {
      const { uid, gid } = await systemUserIds();
      chownSync(dir, uid, gid);
      chownSync(passwordFile, uid, gid);
    }
    await asPostgres('initdb', [
      '--pgdata', dataDir, '--username', SYSTEM_USER, '--pwfile', passwordFile, '--auth-local=trust', '--auth-host=scram-sha-256',
      '--encoding=UTF8', '--locale=C', '--no-sync', '--no-instructions',
    ]);
    rmSync(passwordFile);
    await asPostgres('/bin/mkdir', ['-m', '0700', socketDir]);
    const port = await freePort();
    const settings = [
      `-k ${socketDir}`, `-p ${port}`, '-c listen_addresses=127.0.0.1',
      '-c fsync=off', '-c synchronous_commit=off', '-c full_page_writes=off', '-c max_connections=200', '-c shared_buffers=32MB',
    ].join(' ');
    await asPostgres('pg_ctl', ['--pgdata', dataDir, '--log', join(dir, 'server.log'), '--wait', '--options', settings, 'start']);
    const serverPid = postmasterPid();
    if (serverPid === undefined) throw new Error(`PostgreSQL started without a postmaster.pid in ${dataDir}`);
    const admin = new pg.Pool({ host: socketDir, port, user: SYSTEM_USER, database: 'postgres', max: 1 });
    let databases = 0;
    let stopped: Promise<void> | undefined;

    const stop = async (): Promise<void> => {
      await admin.end().catch(() => undefined);
      if (alive(serverPid)) {
        await asPostgres('pg_ctl', ['--pgdata', dataDir, '--mode', 'immediate', '--wait', 'stop']).catch(() => process.kill(serverPid, 'SIGKILL'));
      }
      // pg_ctl has returned once the postmaster is gone; its children follow it within moments.
      for (let i = 0; i < 100 && (alive(serverPid) || (await childrenOf(serverPid)).length > 0); i += 1) {
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      rmSync(dir, { recursive: true, force: true });
      process.removeListener('exit', onExit);
    };

    return {
      dir,
      socketDir,
      port,
      pid: serverPid,
      async createDatabase(prefix = 'test') {
        databases += 1;
        const name = `${prefix}_${databases}`;
        if (!/^[a-z_][a-z0-9_]*$/.test(name)) throw new Error(`database name ${name}: lower-case letters, digits and _ only`);
        await admin.query(`CREATE DATABASE ${name}`);
        return {
          name,
          config: { host: socketDir, port, user: SYSTEM_USER, database: name },
          url: `postgres://${SYSTEM_USER}:${password}@127.0.0.1:${port}/${name}`,
        };
      },
      stop: () => (stopped ??= stop()),
      async leftovers() {
        const left: string[] = [];
        if (alive(serverPid)) left.push(`postmaster ${serverPid}`);
        for (const child of await childrenOf(serverPid)) left.push(`server process ${child}`);
        const { stdout } = await exec('pgrep', ['-f', dataDir]).catch(() => ({ stdout: '' }));
        for (const other of stdout.split('\n').filter(Boolean)) left.push(`process ${other} naming ${dataDir}`);
        if (existsSync(dir)) left.push(`directory ${dir}`);
        return left;
      },
    };
  } catch (error) {
    onExit();
    process.removeListener('exit', onExit);
    throw error;
  }
}

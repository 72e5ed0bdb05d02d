// Where runs keep their files: session directories (each run writing only to a file system of its own
// container.disk size, runtime/run-disk.ts, docs/disk.md) and workspaces (one file system each,
// runtime/workspace-disks.ts, indexed in workspaces.db; docs/workspaces.md).
import { mkdir, realpath } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { Config } from '../config.js';
import { SessionStore } from '../core/sessions/session-store.js';
import { SharedSessions } from '../core/sessions/shared-sessions.js';
import { DirectorySessionRecords } from '../store/sessions/directory-session-records.js';
import { PostgresSessionRecordStore } from '../store/sessions/postgres-session-record-store.js';
import { WORKSPACES_NEED_ROOT, WorkspaceService } from '../core/workspaces/workspace-service.js';
import { copyLimitBytes, SharedWorkspaceCopies } from '../core/workspaces/shared-copies.js';
import { LoopDisks, unshareMountsBelow } from '../runtime/run-disk.js';
import { SpareWorkspaceDisks } from '../runtime/spare-workspace-disks.js';
import { WorkspaceDisks, workspaceInodes } from '../runtime/workspace-disks.js';
import type { PostgresDatabase } from '../store/postgres/database.js';
import { PostgresWorkspaceStore } from '../store/workspaces/postgres-workspace-store.js';
import { SqliteWorkspaceStore } from '../store/workspaces/sqlite-workspace-store.js';
import type { WorkspaceStore } from '../store/workspaces/workspace-store.js';
import type { Teardown } from './teardown.js';

export interface StorageInputs {
  readonly config: Config;
  /** The shared database (SERVICE_DATABASE_URL) holding the workspaces' index; undefined: workspaces.db. */
  readonly database: PostgresDatabase | undefined;
  /** Runs a previous process left that are followed again: their directories stay. */
  readonly liveRuns: ReadonlySet<string>;
  readonly logger: Logger;
  readonly teardown: Teardown;
}

export interface Storage {
  /** Why this host cannot give runs file systems of their own (not root, no loop devices); undefined: it can. */
  readonly noDisks: string | undefined;
  readonly sessions: SessionStore;
  /** Workspaces: unavailable (503) on a Berth that cannot mount file systems. */
  readonly workspaces: WorkspaceService;
  /** The workspaces' file systems; undefined where workspaces are unavailable. */
  readonly workspaceDisks: WorkspaceDisks | undefined;
}

export async function buildStorage({ config, database, liveRuns, logger, teardown }: StorageInputs): Promise<Storage> {
  const noDisks = await LoopDisks.unavailable();
  if (noDisks !== undefined) logger.warn({ reason: noDisks }, 'container.disk is not enforced: runs, compose stacks and builds write to the host\'s disk without a limit (SERVICE_COMPOSE_STACK_DISK and SERVICE_COMPOSE_BUILD_DISK neither)');
  const shared = database ? await sharedSessions(config, database, logger, teardown) : undefined;
  const sessions = new SessionStore(config.agent.sessionsDir, config.agent.sessionsHostDir, {
    transcriptLimitBytes: config.sessions.maxBytes,
    ...(shared ? { shared, onSaveFailed: (sessionId: string, error: unknown) => logger.error({ err: error, sessionId }, 'a session could not be saved to the shared database: it is on this node only until its next run saves it') } : {}),
    ...(noDisks === undefined ? { disks: new LoopDisks() } : {}),
    onCarryRefused: (sessionId, reasons) =>
      logger.warn({ sessionId, reasons }, 'transcripts a run left were not kept in its session (links, not regular files, or over SERVICE_SESSIONS_MAX_BYTES)'),
  });
  await sessions.init(liveRuns);
  // Last of the resources (released in reverse): the run disks' shared parent, once no disk is left below it.
  if (noDisks === undefined) teardown.release(() => unshareMountsBelow(join(sessions.dir, '.runs')));

  // The workspaces' index and disks are reconciled before anything uses them; unused ones are swept every minute.
  const workspaceStore: WorkspaceStore = database ? await PostgresWorkspaceStore.open(database) : new SqliteWorkspaceStore(join(config.dataDir, 'workspaces.db'));
  teardown.release(async () => workspaceStore.close());
  const fileOwner = { uid: config.agent.usernsBase + config.workspaces.fileOwnerUid, gid: config.agent.usernsBase + config.workspaces.fileOwnerUid };
  const workspaceDisks =
    noDisks === undefined
      ? new WorkspaceDisks(new LoopDisks(), {
          dir: join(config.agent.sessionsDir, '.workspaces'),
          bytes: config.workspaces.maxBytes,
          inodes: workspaceInodes(config.workspaces.maxBytes, config.workspaces.maxFiles),
          treeOwner: fileOwner,
          log: (details, message) => logger.warn(details, message),
        })
      : undefined;
  await workspaceDisks?.init();
  // After every run and agent has ended (resources are released after the work): what no lease holds is unmounted.
  if (workspaceDisks) teardown.release(() => workspaceDisks.close());
  // Blank disks made ahead for new sessions' own workspaces, one per pooled engine (spare-workspace-disks.ts).
  const spareDisks = workspaceDisks ? new SpareWorkspaceDisks(workspaceDisks, config.pool.size + config.pool.agentSize, (details, message) => logger.warn(details, message)) : undefined;
  if (spareDisks) teardown.release(() => spareDisks.close());
  // Several nodes with SERVICE_SHARED_DIR (only with a database, config.ts): workspaces saved there after each
  // run and restored from there by a node without the current copy (core/workspaces/shared-copies.ts).
  const inodes = workspaceInodes(config.workspaces.maxBytes, config.workspaces.maxFiles);
  const copies =
    config.cluster.sharedDir !== undefined && database !== undefined && workspaceDisks !== undefined
      ? { store: await SharedWorkspaceCopies.open(config.cluster.sharedDir, copyLimitBytes(config.workspaces.maxBytes, inodes)), node: config.cluster.nodeName }
      : undefined;
  if (config.cluster.sharedDir !== undefined && copies === undefined) logger.warn({ sharedDir: config.cluster.sharedDir, reason: noDisks }, 'SERVICE_SHARED_DIR is not used: this Berth has no workspaces');
  const workspaces = new WorkspaceService({
    store: workspaceStore,
    disks: spareDisks,
    unavailableReason: noDisks === undefined ? WORKSPACES_NEED_ROOT : `${WORKSPACES_NEED_ROOT}: ${noDisks}`,
    sharedIndex: database !== undefined,
    ...(copies ? { copies } : {}),
    settings: { ...config.workspaces, fileOwner },
    log: (details, message) => logger.warn(details, message),
  });
  await workspaces.init();
  spareDisks?.start();
  if (workspaceDisks) {
    const sweeper = setInterval(() => void workspaces.sweep(Date.now()).catch((error: unknown) => logger.error({ err: error }, 'workspace sweep failed')), Math.max(1_000, Math.min(60_000, config.workspaces.ttlMs)));
    sweeper.unref();
    teardown.release(async () => clearInterval(sweeper));
  }
  return { noDisks, sessions, workspaces, workspaceDisks };
}

/**
 * With a shared database, sessions are saved there and restored from there (core/sessions/shared-sessions.ts):
 * this node's session directories as records on one side, PostgreSQL on the other.
 */
async function sharedSessions(config: Config, database: PostgresDatabase, logger: Logger, teardown: Teardown): Promise<SharedSessions> {
  await mkdir(config.agent.sessionsDir, { recursive: true, mode: 0o700 });
  const local = new DirectorySessionRecords(await realpath(config.agent.sessionsDir), config.sessions.maxBytes);
  const records = await PostgresSessionRecordStore.open(database);
  teardown.release(async () => records.close());
  return new SharedSessions({ local, shared: records, node: config.cluster.nodeName, log: (details, message) => logger.info(details, message) });
}

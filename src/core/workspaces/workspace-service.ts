// Workspaces: a caller's files, on a disk of their own (runtime/workspace-disks.ts), indexed in the store.
// This service decides who may touch which workspace and when: another caller's workspace is "not found"
// (like sessions), one run or agent holds a workspace at a time, the API does not write while one does,
// and a workspace nobody used for SERVICE_WORKSPACE_TTL is removed. docs/workspaces.md.
import { randomUUID } from 'node:crypto';
import { execFile } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { errors } from '../../errors.js';
import { UUID_PATTERN } from '../../uuid.js';
import type { SessionLink, WorkspaceRecord, WorkspaceSource, WorkspaceStore } from '../../store/workspaces/workspace-store.js';
import { takeCheckpoint as takeCheckpointOnDisk } from './checkpoints.js';
import { treeUsage } from './workspace-files.js';
import { translatingFullDisk } from './index-errors.js';
import { Settling } from '../settling.js';
import type { OpenWorkspace } from './open-workspace.js';
import type { WorkspaceCopies } from './shared-copies.js';

export type { WorkspaceRecord, WorkspaceSource } from '../../store/workspaces/workspace-store.js';

const run = promisify(execFile);

/** One run or agent holding a workspace. */
export interface WorkspaceLease {
  readonly id: string;
  /** The disk mount's tree (NOT the view): what gets bound at the workdir. */
  readonly treeHostPath: string;
  /** Idempotent. Measures the tree the run left, then gives the workspace back. */
  release(): Promise<void>;
}

/** JSON of GET /workspaces/:id and of the list's items. */
export interface WorkspaceView {
  readonly id: string;
  readonly created_at: string;
  readonly last_used_at: string;
  /** Bytes of the tree's regular files and links, as last measured. */
  readonly size_bytes: number;
  readonly max_bytes: number;
  readonly file_count: number;
  readonly max_files: number;
  readonly sessions: string[];
  readonly owner_session: string | null;
  readonly in_use: boolean;
  readonly source: WorkspaceSource;
}

export interface WorkspaceHolder {
  readonly kind: 'run' | 'agent';
  readonly id: string;
}

/** What the service needs of the disks (runtime/workspace-disks.ts's WorkspaceDisks; a fake in unit tests). */
export interface WorkspaceDiskPort {
  create(id: string): Promise<MountedWorkspaceDisk>;
  open(id: string): Promise<MountedWorkspaceDisk>;
  exists(id: string): Promise<boolean>;
  remove(id: string): Promise<void>;
  list(): Promise<string[]>;
  /** A blank disk made ahead under a fresh id (runtime/spare-workspace-disks.ts), when one is ready. */
  takeSpare?(): (MountedWorkspaceDisk & { readonly id: string }) | undefined;
}

export interface MountedWorkspaceDisk {
  readonly mountPoint: string;
  readonly view: string;
  release(): void;
}

export interface WorkspaceSettings {
  readonly maxBytes: number;
  readonly maxFiles: number;
  readonly ttlMs: number;
  readonly maxPerCaller: number;
  readonly diffMaxFileBytes: number;
  /** Host uid/gid of the files Berth writes into a tree. */
  readonly fileOwner: { readonly uid: number; readonly gid: number };
}

export interface WorkspaceServiceOptions {
  readonly store: WorkspaceStore;
  /** Undefined on a Berth that cannot mount file systems (rootless): every call answers 503 saying so. */
  readonly disks: WorkspaceDiskPort | undefined;
  /** Why there are no disks (shown in the 503). */
  readonly unavailableReason?: string;
  /**
   * The index is shared by several nodes (SERVICE_DATABASE_URL), each with its workspaces' disks on its own
   * host: a record without a disk here may be another node's, so this node neither drops such records at
   * start nor sweeps them (the node holding the disk does).
   */
  readonly sharedIndex?: boolean;
  /**
   * Several nodes with SERVICE_SHARED_DIR: each workspace is saved there after every run and API write, and a
   * node whose disk is not the current copy (or that has none) restores it before using it (shared-copies.ts).
   */
  readonly copies?: { readonly store: WorkspaceCopies; readonly node: string };
  readonly settings: WorkspaceSettings;
  readonly log?: (details: object, message: string) => void;
  readonly now?: () => number;
  /** Checkpoints (checkpoints.ts); replaceable in unit tests. */
  readonly takeCheckpoint?: (ws: OpenWorkspace, name: 'last_run' | 'upload', options: { diffMaxFileBytes: number }) => Promise<unknown>;
  /** Copies one tree into another (a fork); `cp -a` by default. */
  readonly copyTree?: (from: string, to: string) => Promise<void>;
}

/** On a workspace's disk, beside its tree (`.berth/`, Berth's own): which saved copy the disk holds. */
const COPY_MARKER = 'shared-copy';

/** The reason given when workspaces are asked for on a Berth without disks. */
export const WORKSPACES_NEED_ROOT = 'workspaces need a rootful Berth (each workspace is a loop-mounted file system of its own)';

export class WorkspaceService {
  private readonly leases = new Map<string, WorkspaceHolder>();
  /** API writes in flight per workspace (a run is not let in meanwhile). */
  private readonly writers = new Map<string, number>();
  /** Serializes API writes per workspace, so usage measured after one is what the next one checks. */
  private readonly writeQueues = new Map<string, Promise<unknown>>();
  /** Workspaces being deleted: gone for every caller from the moment the delete begins. */
  private readonly deleting = new Set<string>();
  /** Creations in flight per owner (counted against the per-caller cap before they are in the store). */
  private readonly creating = new Map<string, number>();
  /**
   * Runs answered at their result while their container still holds the workspace (RunService
   * executeUntilAnswered): a request on the workspace waits for that end instead of seeing it in use.
   */
  private readonly settling = new Settling();
  private readonly settings: WorkspaceSettings;
  private readonly now: () => number;
  /** Restores from the shared directory in progress, one per workspace: later users wait for it. */
  private readonly restoring = new Map<string, Promise<void>>();

  /** The index, its full-disk failures answered as 503 (index-errors.ts). */
  private readonly store: WorkspaceStore;

  constructor(private readonly options: WorkspaceServiceOptions) {
    this.store = translatingFullDisk(options.store);
    this.settings = options.settings;
    this.now = options.now ?? Date.now;
  }

  /** Whether workspaces work on this Berth. */
  get available(): boolean {
    return this.options.disks !== undefined;
  }

  /** Throws the 503 a Berth without disks answers to anything about workspaces. */
  requireAvailable(): void {
    this.disks();
  }

  /** At start: index entries without a disk are dropped, disks without an index entry removed. */
  async init(): Promise<void> {
    const disks = this.options.disks;
    if (!disks) return;
    const known = new Set(await this.store.ids());
    const present = new Set(await disks.list());
    for (const id of known) {
      if (present.has(id) || this.options.sharedIndex) continue;
      this.options.log?.({ workspace: id }, 'workspace has no disk (removed outside Berth?): dropped from the index');
      await this.store.delete(id);
    }
    for (const id of present) {
      if (known.has(id)) continue;
      this.options.log?.({ workspace: id }, 'removing a workspace disk the index does not know (a create a previous process did not finish)');
      await disks.remove(id);
    }
  }

  async create(owner: string, options: { source?: 'empty' | 'git' | 'upload'; ownedBySession?: string } = {}): Promise<WorkspaceRecord> {
    const source: WorkspaceSource = options.ownedBySession !== undefined ? 'session' : (options.source ?? 'empty');
    return this.createWith(owner, source, options.ownedBySession);
  }

  /** The run holding `id` was answered; until `rest` settles, requests on the workspace wait for it (settled). */
  settleInBackground(id: string, rest: Promise<unknown>): void {
    this.settling.add(id, rest);
  }

  /** Resolves once no answered run still holds the workspace. */
  async settled(id: string): Promise<void> {
    await this.settling.settled(id);
  }

  async get(owner: string, id: string): Promise<WorkspaceView> {
    await this.settled(id);
    return this.view(await this.owned(owner, id));
  }

  async list(owner: string): Promise<WorkspaceView[]> {
    this.disks();
    const records = await this.store.listByOwner(owner);
    return Promise.all(records.filter((record) => !this.deleting.has(record.id)).map((record) => this.view(record)));
  }

  async delete(owner: string, id: string): Promise<void> {
    await this.settled(id);
    const record = await this.owned(owner, id);
    await this.remove(record.id);
  }

  async withFiles<T>(owner: string, id: string, mode: 'read' | 'write', fn: (ws: OpenWorkspace) => Promise<T>): Promise<T> {
    await this.settled(id);
    const record = await this.owned(owner, id);
    if (mode === 'read') return this.onDisk(record, fn);
    if (this.leases.has(id)) throw errors.workspaceBusy(id);
    this.writers.set(id, (this.writers.get(id) ?? 0) + 1);
    const previous = this.writeQueues.get(id) ?? Promise.resolve();
    const turn = previous.catch(() => undefined).then(async () => {
      // Re-read: the write before this one changed the usage this one is checked against.
      const current = await this.owned(owner, id);
      return this.onDisk(current, async (ws) => {
        let reported: { bytes: number; files: number } | undefined;
        let succeeded = false;
        const adjustUsage = (bytes: number, files: number) => {
          reported = { bytes: (reported?.bytes ?? 0) + bytes, files: (reported?.files ?? 0) + files };
        };
        try {
          const result = await fn({ ...ws, adjustUsage });
          succeeded = true;
          return result;
        } finally {
          const counted = succeeded ? reported : undefined;
          await (counted
            ? this.store.update(id, { sizeBytes: Math.max(0, current.sizeBytes + counted.bytes), fileCount: Math.max(0, current.fileCount + counted.files) })
            : this.measure(ws)
          ).catch((error: unknown) => this.options.log?.({ err: error, workspace: id }, 'could not measure a workspace'));
          await this.saveCopy(id, ws.view);
        }
      });
    });
    this.writeQueues.set(id, turn);
    try {
      return await turn;
    } finally {
      const left = (this.writers.get(id) ?? 1) - 1;
      if (left === 0) this.writers.delete(id);
      else this.writers.set(id, left);
      if (this.writeQueues.get(id) === turn) this.writeQueues.delete(id);
    }
  }

  async acquire(owner: string, id: string, holder: WorkspaceHolder): Promise<WorkspaceLease> {
    await this.settled(id);
    const record = await this.owned(owner, id);
    if (this.leases.has(id) || (this.writers.get(id) ?? 0) > 0) throw errors.workspaceBusy(id);
    this.leases.set(id, holder);
    let disk: MountedWorkspaceDisk | undefined;
    try {
      disk = await this.openDisk(id);
      const ws = this.openWorkspace(record, disk);
      await this.checkpoint(ws, 'last_run');
      await this.store.update(id, { lastUsedAt: this.isoNow(), runCheckpointAt: this.isoNow() });
    } catch (error) {
      disk?.release();
      this.leases.delete(id);
      throw error;
    }
    const mounted = disk;
    let released: Promise<void> | undefined;
    return {
      id,
      treeHostPath: join(mounted.mountPoint, 'tree'),
      release: () => {
        released ??= (async () => {
          try {
            await this.measure(this.openWorkspace(record, mounted));
            await this.store.update(id, { lastUsedAt: this.isoNow() });
          } catch (error) {
            this.options.log?.({ err: error, workspace: id }, 'could not measure a workspace after its run');
          }
          try {
            await this.saveCopy(id, mounted.view);
          } finally {
            mounted.release();
            if (this.leases.get(id) === holder) this.leases.delete(id);
          }
        })();
        return released;
      },
    };
  }

  /**
   * Takes the `upload` checkpoint of a workspace open for writing (after an archive upload or a clone) and
   * records when: `?since=upload` diffs against it.
   */
  async checkpointUpload(ws: OpenWorkspace): Promise<void> {
    await this.checkpoint(ws, 'upload');
    const record = await this.store.get(ws.id);
    // An empty workspace filled by an archive is an uploaded one from now on.
    await this.store.update(ws.id, { uploadCheckpointAt: this.isoNow(), ...(record?.source === 'empty' ? { source: 'upload' as const } : {}) });
  }

  /** Who holds the workspace now, if anyone. */
  holder(id: string): WorkspaceHolder | undefined {
    return this.leases.get(id);
  }

  async sessionWorkspace(sessionId: string): Promise<{ id: string; owned: boolean } | undefined> {
    if (!this.available) return undefined;
    const link = await this.store.linkOf(sessionId);
    if (link === undefined || this.deleting.has(link.workspaceId)) return undefined;
    return { id: link.workspaceId, owned: link.owned };
  }

  async linkSession(sessionId: string, workspaceId: string, owned: boolean): Promise<void> {
    this.disks();
    const link: SessionLink = { sessionId, workspaceId, owned };
    await this.store.link(link);
    await this.store.update(workspaceId, { lastUsedAt: this.isoNow() });
  }

  async forkForSession(owner: string, fromWorkspaceId: string, newSessionId: string): Promise<string> {
    const from = await this.owned(owner, fromWorkspaceId);
    const copy = await this.createWith(owner, 'fork', newSessionId);
    try {
      await this.onDisk(from, async (source) => {
        const target = await this.disks().open(copy.id);
        try {
          await (this.options.copyTree ?? copyTree)(source.tree, join(target.view, 'tree'));
          await this.measure(this.openWorkspace(copy, target));
          await this.saveCopy(copy.id, target.view);
        } finally {
          target.release();
        }
      });
      await this.linkSession(newSessionId, copy.id, true);
    } catch (error) {
      await this.remove(copy.id).catch(() => undefined);
      throw error;
    }
    return copy.id;
  }

  async removeForSession(sessionId: string): Promise<void> {
    if (!this.available) return;
    const link = await this.store.linkOf(sessionId);
    if (link === undefined) return;
    const record = await this.store.get(link.workspaceId);
    if (link.owned && record?.ownedBySession === sessionId) {
      await this.remove(record.id);
      return;
    }
    await this.store.unlink(sessionId);
  }

  async sweep(nowMs: number): Promise<void> {
    if (!this.available) return;
    const unused = await this.store.unusedSince(new Date(nowMs - this.settings.ttlMs).toISOString());
    // With a shared index, only the workspaces whose disks are on this node.
    // With saved copies (SERVICE_SHARED_DIR) a workspace is on no node's disk in particular: any node sweeps it.
    const here = this.options.sharedIndex && this.options.disks && !this.options.copies ? new Set(await this.options.disks.list()) : undefined;
    const stale = here ? unused.filter((record) => here.has(record.id)) : unused;
    for (const record of stale) {
      if (this.leases.has(record.id) || (this.writers.get(record.id) ?? 0) > 0 || this.deleting.has(record.id)) continue;
      await this.remove(record.id).then(
        () => this.options.log?.({ workspace: record.id, lastUsedAt: record.lastUsedAt }, 'removed a workspace unused for SERVICE_WORKSPACE_TTL'),
        (error: unknown) => this.options.log?.({ err: error, workspace: record.id }, 'could not remove an expired workspace'),
      );
    }
  }

  private async createWith(owner: string, source: WorkspaceSource, ownedBySession: string | undefined): Promise<WorkspaceRecord> {
    const disks = this.disks();
    const counted = ownedBySession === undefined;
    if (counted) {
      const existing = (await this.store.countCallerOwned(owner)) + (this.creating.get(owner) ?? 0);
      if (existing >= this.settings.maxPerCaller) throw errors.workspacesPerCaller(this.settings.maxPerCaller);
      this.creating.set(owner, (this.creating.get(owner) ?? 0) + 1);
    }
    try {
      // A new session's own workspace takes a disk made ahead: no mkfs and no mounts on its run's path.
      const spare = ownedBySession !== undefined ? disks.takeSpare?.() : undefined;
      const id = spare?.id ?? randomUUID();
      const disk = spare ?? (await disks.create(id));
      disk.release();
      const now = this.isoNow();
      const record: WorkspaceRecord = {
        id,
        owner,
        createdAt: now,
        lastUsedAt: now,
        source,
        ownedBySession: ownedBySession ?? null,
        uploadCheckpointAt: null,
        runCheckpointAt: null,
        sizeBytes: 0,
        fileCount: 0,
      };
      try {
        await this.store.insert(record);
      } catch (error) {
        await disks.remove(id).catch(() => undefined);
        throw error;
      }
      return record;
    } finally {
      if (counted) {
        const left = (this.creating.get(owner) ?? 1) - 1;
        if (left === 0) this.creating.delete(owner);
        else this.creating.set(owner, left);
      }
    }
  }

  /** Unmounts and deletes the workspace's disk and index entry (409 while a run, agent or upload uses it). */
  private async remove(id: string): Promise<void> {
    if (this.leases.has(id) || (this.writers.get(id) ?? 0) > 0) throw errors.workspaceBusy(id);
    if (this.deleting.has(id)) return;
    this.deleting.add(id);
    try {
      await this.disks().remove(id);
      await this.store.delete(id);
      await this.options.copies?.store.remove(id);
    } finally {
      this.deleting.delete(id);
    }
  }

  /** The caller's workspace; anything else (another caller's, a malformed id, one being deleted) is 404. */
  private async owned(owner: string, id: string): Promise<WorkspaceRecord> {
    this.disks();
    if (!UUID_PATTERN.test(id) || this.deleting.has(id)) throw errors.workspaceNotFound(id);
    const record = await this.store.get(id);
    if (record === undefined || record.owner !== owner) throw errors.workspaceNotFound(id);
    return record;
  }

  private async onDisk<T>(record: WorkspaceRecord, fn: (ws: OpenWorkspace) => Promise<T>): Promise<T> {
    const disk = await this.openDisk(record.id);
    try {
      await this.store.update(record.id, { lastUsedAt: this.isoNow() });
      return await fn(this.openWorkspace(record, disk));
    } finally {
      disk.release();
    }
  }

  /** The workspace's disk, mounted; with saved copies, made current from the shared directory first. */
  private async openDisk(id: string): Promise<MountedWorkspaceDisk> {
    if (this.options.copies) {
      let pending = this.restoring.get(id);
      if (pending === undefined) {
        pending = this.makeCurrent(id).finally(() => this.restoring.delete(id));
        this.restoring.set(id, pending);
      }
      await pending;
    }
    return this.disks().open(id);
  }

  /**
   * Makes this node's disk of the workspace its current content: kept when it holds the last saved copy (or
   * the workspace was never saved and the disk is here), else made anew from the shared directory. A
   * workspace never saved whose disk is elsewhere is empty when the index says so; otherwise its content is
   * on that node's disk only: 503.
   */
  private async makeCurrent(id: string): Promise<void> {
    const copies = this.options.copies!;
    const disks = this.disks();
    const saved = await this.store.copyOf(id);
    if (saved === undefined) throw errors.workspaceNotFound(id);
    const present = await disks.exists(id);
    // This node saved the last copy from this very disk (a disk is only ever replaced by the last copy), or
    // the disk notes the last copy: current. Asking the node first also covers a save of this node's own
    // between its index update and its note on the disk.
    if (present && (saved.copy === 0 || saved.node === copies.node || (await this.copyOnDisk(id)) === saved.copy)) return;
    if (saved.copy === 0) {
      if ((await this.store.get(id))?.fileCount === 0) {
        (await disks.create(id)).release();
        return;
      }
      throw errors.runtimeUnavailable(`workspace ${id} was made on another node and never saved to SERVICE_SHARED_DIR: its files are on that node's disk only`);
    }
    // An older copy here (the workspace ran on another node since): replaced whole.
    if (present) await disks.remove(id);
    const disk = await disks.create(id);
    try {
      await copies.store.restore(id, disk.view);
      await writeFile(join(disk.view, '.berth', COPY_MARKER), String(saved.copy), { mode: 0o600 });
    } catch (error) {
      disk.release();
      await disks.remove(id).catch(() => undefined);
      throw error;
    }
    disk.release();
    this.options.log?.({ workspace: id, copy: saved.copy, savedBy: saved.node }, 'workspace restored from SERVICE_SHARED_DIR');
  }

  /** The number of the saved copy this node's disk holds (0: none recorded). */
  private async copyOnDisk(id: string): Promise<number> {
    const disk = await this.disks().open(id);
    try {
      const text = await readFile(join(disk.view, '.berth', COPY_MARKER), 'utf8').catch(() => '0');
      return Number.parseInt(text, 10) || 0;
    } finally {
      disk.release();
    }
  }

  /**
   * With saved copies: the workspace's tree (on its view) saved to the shared directory, recorded in the
   * index as the next copy by this node, and noted on this disk. A failure is logged: the tree is whole on this
   * node, and other nodes keep using the copy before it.
   */
  private async saveCopy(id: string, view: string): Promise<void> {
    const copies = this.options.copies;
    if (!copies || this.deleting.has(id)) return;
    try {
      await copies.store.save(id, view);
      const copy = await this.store.recordCopy(id, copies.node);
      if (copy !== undefined) await writeFile(join(view, '.berth', COPY_MARKER), String(copy), { mode: 0o600 });
    } catch (error) {
      this.options.log?.({ err: error, workspace: id }, 'could not save a workspace to SERVICE_SHARED_DIR: other nodes have its copy before this change');
    }
  }

  private openWorkspace(record: WorkspaceRecord, disk: MountedWorkspaceDisk): OpenWorkspace {
    return {
      id: record.id,
      view: disk.view,
      tree: join(disk.view, 'tree'),
      internal: join(disk.view, '.berth'),
      maxBytes: this.settings.maxBytes,
      maxFiles: this.settings.maxFiles,
      fileOwner: { uid: this.settings.fileOwner.uid, gid: this.settings.fileOwner.gid },
      fileCount: record.fileCount,
    };
  }

  private async measure(ws: OpenWorkspace): Promise<void> {
    const usage = await treeUsage(ws.tree);
    await this.store.update(ws.id, { sizeBytes: usage.bytes, fileCount: usage.files });
  }

  private async checkpoint(ws: OpenWorkspace, name: 'last_run' | 'upload'): Promise<void> {
    const take = this.options.takeCheckpoint ?? takeCheckpointOnDisk;
    await take(ws, name, { diffMaxFileBytes: this.settings.diffMaxFileBytes });
  }

  private async view(record: WorkspaceRecord): Promise<WorkspaceView> {
    return {
      id: record.id,
      created_at: record.createdAt,
      last_used_at: record.lastUsedAt,
      size_bytes: record.sizeBytes,
      max_bytes: this.settings.maxBytes,
      file_count: record.fileCount,
      max_files: this.settings.maxFiles,
      sessions: await this.store.sessionsOf(record.id),
      owner_session: record.ownedBySession,
      in_use: this.leases.has(record.id),
      source: record.source,
    };
  }

  private disks(): WorkspaceDiskPort {
    if (!this.options.disks) throw errors.runtimeUnavailable(this.options.unavailableReason ?? WORKSPACES_NEED_ROOT);
    return this.options.disks;
  }

  private isoNow(): string {
    return new Date(this.now()).toISOString();
  }
}

/**
 * A fork's copy: everything of the tree as it is (links as links, owners, times and permission bits kept),
 * except setuid, setgid and sticky bits, which Berth never writes into a tree. Both paths are on views, so
 * neither cp nor find follows a link the run planted.
 */
async function copyTree(from: string, to: string): Promise<void> {
  await run('cp', ['-a', '--no-dereference', '--', `${from}/.`, `${to}/`]);
  await run('find', [to, '-xdev', '!', '-type', 'l', '-perm', '/7000', '-exec', 'chmod', 'ug-s,o-t', '{}', '+']);
}

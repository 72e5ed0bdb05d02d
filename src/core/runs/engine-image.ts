// The engine image at start. Mounted (the default): it must be present — pulled first when it is missing
// and SERVICE_AGENT_AUTO_PULL_CLI=true, with its progress in the log — and is then mounted for the whole
// life of the process (runtime mountImageTree says why). Not mounted (SERVICE_AGENT_MOUNT_CLAUDE_CLI=false):
// agent images bring the engine themselves, and nothing is needed here.
import type { Logger } from 'pino';
import { chmod } from 'node:fs/promises';
import { join, relative } from 'node:path';
import type { Images, MountedImageTree } from '../../runtime/ports/images.js';
import { IMAGE_TREE_LABEL } from '../../runtime/ports/labels.js';
import { ENGINE_BINARY, ENGINE_MOUNT } from '../../engine/layout.js';

export interface EngineImageSettings {
  readonly image: string;
  readonly mount: boolean;
  readonly autoPull: boolean;
  /** Registries (host[:port]) reached without TLS verification. */
  readonly insecureRegistries: readonly string[];
  readonly instance: string;
}

/** The mounted engine tree, or undefined when agent images carry the engine; throws with what to do. */
export async function prepareEngineImage(runtime: Pick<Images, 'inspectImage' | 'pullImage' | 'mountImageTree'>, settings: EngineImageSettings, log: Pick<Logger, 'info'>): Promise<MountedImageTree | undefined> {
  if (!settings.mount) {
    log.info('SERVICE_AGENT_MOUNT_CLAUDE_CLI=false: each agent image must bring the engine (`claude` on its PATH)');
    return undefined;
  }
  const { image } = settings;
  if ((await runtime.inspectImage(image)) === undefined) {
    if (!settings.autoPull) {
      throw new Error(
        `the engine image ${image} is not on this host; build it with 'make setup', pull it, or set SERVICE_AGENT_AUTO_PULL_CLI=true to pull it at start`,
      );
    }
    const registry = image.includes('/') ? image.split('/')[0] : undefined;
    log.info({ image }, 'pulling the engine image (SERVICE_AGENT_AUTO_PULL_CLI=true)');
    try {
      await runtime.pullImage(image, {
        tlsVerify: registry === undefined || !settings.insecureRegistries.includes(registry),
        quiet: false,
        onProgress: (progress) => log.info({ image, progress: progress.message }, 'pulling the engine image'),
      });
    } catch (error) {
      throw new Error(`the engine image ${image} could not be pulled (SERVICE_AGENT_AUTO_PULL_CLI=true): ${(error as Error).message}`, { cause: error });
    }
    log.info({ image }, 'engine image pulled');
  }
  const tree = await runtime
    .mountImageTree(image, { name: `berth-engine-tree-${settings.instance}`, labels: { [IMAGE_TREE_LABEL]: settings.instance } })
    .catch((error: unknown) => {
      throw new Error(`the engine image ${image} cannot be mounted (${(error as Error).message})`, { cause: error });
    });
  try {
    await makeExecuteOnly(tree.path);
  } catch (error) {
    await tree.release().catch(() => undefined);
    throw new Error(`the engine binary of ${image} cannot be made execute-only (${(error as Error).message})`, { cause: error });
  }
  log.info({ image, tree: tree.path }, 'engine image mounted for the lifetime of this process');
  return tree;
}

/**
 * The engine runs as the container's user, and so does every command it runs for the model. An engine
 * binary that user may execute but not read makes the kernel mark the engine's process non-dumpable at its
 * execve: its /proc/<pid>/fd (its stdout), its memory and ptrace are closed to every process of the
 * container without CAP_SYS_PTRACE (they all lack it). Code in the container can then neither write
 * forged stream-json lines (a `result` ending the turn) into the engine's output, nor stop the engine by
 * attaching to it (issue 23, findings 4 and 6). The chmod is made in the holder container's own layer
 * (a copy-up once per start); the image is unchanged.
 */
async function makeExecuteOnly(treePath: string): Promise<void> {
  const binary = join(treePath, relative(ENGINE_MOUNT, ENGINE_BINARY));
  await chmod(binary, 0o711).catch(async (error: NodeJS.ErrnoException) => {
    // Berth in its image (docs/deploy.md): Podman mounts the tree in the host's mount namespace under its
    // overlay directory, which Podman keeps a private mount, so the mount never reaches Berth's container.
    // With the host's PID namespace (--pid host) the host's root is seen through a host process: init's, or
    // (where init holds capabilities the container lacks, as on some VMs) conmon's, Berth's parent.
    if (error.code !== 'ENOENT') throw error;
    for (const pid of [1, process.ppid]) {
      if (await chmod(join(`/proc/${pid}/root`, binary), 0o711).then(() => true, () => false)) return;
    }
    throw error;
  });
}

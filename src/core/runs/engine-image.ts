// The engine image at start. Mounted (the default): it must be present — pulled first when it is missing
// and SERVICE_AGENT_AUTO_PULL_CLI=true, with its progress in the log — and is then mounted for the whole
// life of the process (runtime mountImageTree says why). Not mounted (SERVICE_AGENT_MOUNT_CLAUDE_CLI=false):
// agent images bring the engine themselves, and nothing is needed here.
import type { Logger } from 'pino';
import { IMAGE_TREE_LABEL, type ContainerRuntime, type MountedImageTree } from '../../runtime/container-runtime.js';

export interface EngineImageSettings {
  readonly image: string;
  readonly mount: boolean;
  readonly autoPull: boolean;
  /** Registries (host[:port]) reached without TLS verification. */
  readonly insecureRegistries: readonly string[];
  readonly instance: string;
}

/** The mounted engine tree, or undefined when agent images carry the engine; throws with what to do. */
export async function prepareEngineImage(runtime: ContainerRuntime, settings: EngineImageSettings, log: Pick<Logger, 'info'>): Promise<MountedImageTree | undefined> {
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
  log.info({ image, tree: tree.path }, 'engine image mounted for the lifetime of this process');
  return tree;
}

// The engine is a glibc binary: an image without glibc cannot run it. Berth looks for the musl loader in
// the image's files (not at its name) and remembers the answer per image id, so the probe runs once: also
// when a burst of first runs asks at the same moment (they share the probe in flight instead of each
// creating a probe container, which cost up to 0.7 s a run at concurrency 8).
import { errors } from '../../errors.js';
import type { ContainerRuntime } from '../../runtime/container-runtime.js';
import { ENGINE_BINARY } from '../../engine/layout.js';

const MUSL_LOADERS = ['/lib/ld-musl-x86_64.so.1', '/lib/ld-musl-aarch64.so.1', '/lib/ld-musl-armhf.so.1'];

/** Where the engine comes from: mounted at /opt/claude from its own image, or inside the agent image. */
export type EngineSource = 'mounted' | 'in-image';

export class ImageCheck {
  private readonly muslByImageId = new Map<string, Promise<boolean>>();
  private readonly engineByImageId = new Map<string, Promise<string | undefined>>();

  constructor(
    private readonly runtime: ContainerRuntime,
    private readonly engine: EngineSource = 'mounted',
  ) {}

  /**
   * The engine executable a run in this image starts: the mounted one, or (SERVICE_AGENT_MOUNT_CLAUDE_CLI
   * =false) the `claude` found on the image's PATH, probed once per image id; 400 when the image has none.
   */
  async engineBinary(image: string): Promise<string> {
    if (this.engine === 'mounted') return ENGINE_BINARY;
    const info = await this.runtime.inspectImage(image);
    if (!info) throw errors.imageNotFound(image);
    let found = this.engineByImageId.get(info.id);
    if (found === undefined) {
      const candidates = (info.path ?? '').split(':').filter((dir) => dir.startsWith('/')).map((dir) => `${dir.replace(/\/+$/, '')}/claude`);
      found = this.runtime.existingImagePaths(image, candidates).then((present) => candidates.find((path) => present.has(path)));
      this.engineByImageId.set(info.id, found);
      found.catch(() => this.engineByImageId.delete(info.id));
    }
    const binary = await found;
    if (binary === undefined) throw errors.engineNotInImage(image);
    return binary;
  }

  /** Refuses an image that is missing or musl-based; returns its id. */
  async ensureRunnable(image: string): Promise<string> {
    const info = await this.runtime.inspectImage(image);
    if (!info) throw errors.imageNotFound(image);
    let probe = this.muslByImageId.get(info.id);
    if (probe === undefined) {
      probe = this.runtime.imageHasAnyPath(image, MUSL_LOADERS);
      this.muslByImageId.set(info.id, probe);
      // A failed probe is not an answer: the next run probes again.
      probe.catch(() => this.muslByImageId.delete(info.id));
    }
    if (await probe) throw errors.muslImage(image);
    return info.id;
  }
}

// The engine is a glibc binary: an image without glibc cannot run it. Whether an image has it is the rule
// GET /images ranks by (core/images/compatibility.ts), applied to the same facts: its files are probed
// (not its name) once per image id, also when a burst of first runs asks at the same moment (they share
// the probe in flight instead of each creating a probe container, which cost up to 0.7 s a run at
// concurrency 8).
import { errors } from '../../errors.js';
import type { Images } from '../../runtime/ports/images.js';
import { ENGINE_BINARY } from '../../engine/layout.js';
import { engineIncompatibility } from '../images/compatibility.js';
import { ImageProbe } from '../images/image-probe.js';

/** Where the engine comes from: mounted at /opt/claude from its own image, or inside the agent image. */
export type EngineSource = 'mounted' | 'in-image';

export class ImageCheck {
  private readonly engineByImageId = new Map<string, Promise<string | undefined>>();

  constructor(
    private readonly runtime: Pick<Images, 'inspectImage' | 'existingImagePaths'>,
    private readonly engine: EngineSource = 'mounted',
    /** Shared with GET /images, so an image is probed once for both. */
    private readonly probe = new ImageProbe(runtime),
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

  /** Refuses an image that is missing or that the engine cannot run in (musl, or no C library at all); returns its id. */
  async ensureRunnable(image: string): Promise<string> {
    const info = await this.runtime.inspectImage(image);
    if (!info) throw errors.imageNotFound(image);
    switch (engineIncompatibility(await this.probe.facts(image, info.id))) {
      case 'musl':
        throw errors.muslImage(image);
      case 'no_glibc':
        throw errors.noGlibcImage(image);
      case undefined:
        return info.id;
    }
  }
}

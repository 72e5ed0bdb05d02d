// The engine is a glibc binary: an image without glibc cannot run it. Berth looks for the musl loader in
// the image's files (not at its name) and remembers the answer per image id, so the probe runs once.
import { errors } from '../../errors.js';
import type { ContainerRuntime } from '../../runtime/container-runtime.js';

const MUSL_LOADERS = ['/lib/ld-musl-x86_64.so.1', '/lib/ld-musl-aarch64.so.1', '/lib/ld-musl-armhf.so.1'];

export class ImageCheck {
  private readonly muslByImageId = new Map<string, boolean>();

  constructor(private readonly runtime: ContainerRuntime) {}

  /** Refuses an image that is missing or musl-based; returns its id. */
  async ensureRunnable(image: string): Promise<string> {
    const info = await this.runtime.inspectImage(image);
    if (!info) throw errors.imageNotFound(image);
    let musl = this.muslByImageId.get(info.id);
    if (musl === undefined) {
      musl = await this.runtime.imageHasAnyPath(image, MUSL_LOADERS);
      this.muslByImageId.set(info.id, musl);
    }
    if (musl) throw errors.muslImage(image);
    return info.id;
  }
}

// Builds over Podman (./image-build.ts confines them like a run); the answer is the built image's id.
import type { Builds, BuildOptions } from '../ports/builds.js';
import type { Images } from '../ports/images.js';
import { RuntimeError } from '../ports/runtime-error.js';
import type { PodmanClient } from './client.js';
import { buildImage } from './image-build.js';

export class PodmanBuilds implements Builds {
  readonly #client: PodmanClient;
  readonly #images: Pick<Images, 'inspectImage'>;

  constructor(client: PodmanClient, images: Pick<Images, 'inspectImage'>) {
    this.#client = client;
    this.#images = images;
  }

  async buildImage(options: BuildOptions): Promise<string> {
    await buildImage(this.#client, options);
    const image = await this.#images.inspectImage(options.tag);
    if (!image) throw new RuntimeError(`the build ended without an image tagged ${options.tag}`, false);
    return image.id;
  }
}

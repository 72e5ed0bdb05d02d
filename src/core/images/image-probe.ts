// Probes an image's files once per image id (tags move, ids do not) and remembers the facts. Concurrent
// asks for the same id share one probe.
import type { Images } from '../../runtime/ports/images.js';
import { factsFromPaths, probedPaths, type ImageFacts } from './compatibility.js';

export class ImageProbe {
  private readonly byImageId = new Map<string, Promise<ImageFacts>>();

  constructor(private readonly runtime: Pick<Images, 'existingImagePaths'>) {}

  facts(reference: string, imageId: string): Promise<ImageFacts> {
    let facts = this.byImageId.get(imageId);
    if (!facts) {
      facts = this.runtime.existingImagePaths(reference, probedPaths()).then(factsFromPaths);
      this.byImageId.set(imageId, facts);
      // A failed probe (image removed meanwhile, Podman restarting) is not remembered.
      facts.catch(() => this.byImageId.delete(imageId));
    }
    return facts;
  }
}

// The images a build reads, decided by Berth: every FROM (and COPY --from) that is not one of the build's
// own stages must be allowed by SERVICE_AGENT_ALLOWED_IMAGE_PATTERNS and present on the host, since builds
// never pull (the pull policy is `never`); an image another stack built is never a base (it belongs to
// that stack's session). Refusals are 400s naming the Containerfile's line.
import { BerthError, errors } from '../../errors.js';
import type { Images } from '../../runtime/ports/images.js';
import { validateImage, type ImagePolicy } from '../validation/images.js';
import { checkContainerfile, ContainerfileError } from './containerfile.js';
import { isBuiltImageReference } from '../compose-file/stack-definition.js';

export interface BuildCheckContext {
  readonly runtime: Pick<Images, 'inspectImage'>;
  readonly policy: ImagePolicy;
  readonly args: Readonly<Record<string, string>>;
  /** The field refusals name, e.g. `container.environment: services.app.build.dockerfile "Dockerfile"`. */
  readonly at: string;
}

/** The check of a build's Containerfile; answers the images it reads, normalised. */
export function buildContainerfileCheck(context: BuildCheckContext): (text: string) => Promise<readonly string[]> {
  return async (text) => {
    const reads: string[] = [];
    let images;
    try {
      images = checkContainerfile(text, context.args);
    } catch (error) {
      if (error instanceof ContainerfileError) throw errors.invalid(`${context.at}: ${error.message}`);
      throw error;
    }
    for (const image of images) {
      const field = `${context.at}, ${image.at}`;
      if (isBuiltImageReference(image.reference)) throw errors.invalid(`${field}: "${image.reference}" is an image Berth built for a stack; those belong to their session`);
      let normalised: string;
      try {
        normalised = validateImage(image.reference, context.policy, field);
      } catch (error) {
        if (error instanceof BerthError) throw error;
        throw errors.invalid(`${field}: "${image.reference}" is not a valid image reference`);
      }
      if (!(await context.runtime.inspectImage(normalised))) {
        throw errors.invalid(`${field}: "${image.reference}" is not present on this host; builds never pull (pull it first with POST /images/pull)`);
      }
      if (!reads.includes(normalised)) reads.push(normalised);
    }
    return reads;
  };
}

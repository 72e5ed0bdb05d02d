// The image endpoints' domain: local images with their compatibility (ranked, tools detected), one
// image by name, registry search, and pull. Registry failures are translated into the catalogue here.
import { BerthError, errors } from '../../errors.js';
import { RegistryError, type Images, type ImageSummary } from '../../runtime/ports/images.js';
import { STACK_BUILD_LABEL } from '../../runtime/ports/labels.js';
import { isBuiltImageReference } from '../compose-file/stack-definition.js';
import { formatImageReference, normaliseImageReference, parseImageReference } from '../validation/images.js';
import { OFFICIAL_LABEL, rankImage, type CompatibilityRank } from './compatibility.js';
import type { ImageProbe } from './image-probe.js';
import { checkSearchTerm, isAllowedImage, planPull, searchRegistry, type ImageCatalogPolicy, type PullPlan } from './image-requests.js';

export interface ImageRecord {
  readonly repository: string;
  readonly tag: string;
  readonly id: string;
  readonly size: number;
  readonly compatibility_rank: CompatibilityRank;
  readonly compatible: boolean;
  readonly tools: readonly string[];
  /** Whether runs and pulls may use it under SERVICE_AGENT_ALLOWED_IMAGE_PATTERNS. */
  readonly allowed: boolean;
}

export interface SearchResult {
  readonly name: string;
  readonly description: string;
  readonly stars: number;
  readonly official: boolean;
}

export interface PullRequest {
  readonly image: string;
  readonly quiet?: boolean;
  readonly platform?: string;
}

export interface PullResult {
  readonly success: true;
  readonly image_id: string;
  readonly image: string;
}

/** One step of a pull, as the runtime reports it, with the blobs counted so far. */
export interface PullProgressUpdate {
  /** The runtime's own words, e.g. "Copying blob sha256:…". */
  readonly message: string;
  /** Blobs (layers) whose copy has started. */
  readonly blobs_started: number;
  /** Blobs copied: present once every layer is copied (the runtime does not report each one's end). */
  readonly blobs_done?: number;
}

export interface PullWatch {
  readonly onProgress?: (progress: PullProgressUpdate) => void;
  /** Stops the pull (the caller went away); the pull then rejects with the signal's reason. */
  readonly signal?: AbortSignal;
}

/** A pull that was checked and is ready to start: its refusals have been thrown already. */
export interface PreparedPull {
  /** The fully qualified reference that will be pulled. */
  readonly reference: string;
  run(watch?: PullWatch): Promise<PullResult>;
}

export const SEARCH_LIMIT_DEFAULT = 25;
export const SEARCH_LIMIT_MAX = 100;
// Probes run a few images at a time: each one is a created container and some thirty HEAD requests.
const PROBE_CONCURRENCY = 4;

export interface ImageCatalogOptions {
  readonly runtime: Pick<Images, 'listImages' | 'inspectImage' | 'pullImage' | 'searchImages'>;
  readonly probe: ImageProbe;
  readonly policy: ImageCatalogPolicy;
}

/** `registry:5000/team/app:1.2` → repository `registry:5000/team/app`, tag `1.2`. */
export function splitRepoTag(repoTag: string): { repository: string; tag: string } {
  const colon = repoTag.lastIndexOf(':');
  if (colon <= repoTag.lastIndexOf('/')) return { repository: repoTag, tag: '' };
  return { repository: repoTag.slice(0, colon), tag: repoTag.slice(colon + 1) };
}

/** The short form people write in patterns: `docker.io/library/python:3` → `python:3`, `docker.io/team/app` → `team/app`. */
export function familiarReference(reference: string): string {
  return reference.replace(/^docker\.io\/(?:library\/(?=[^/]+$|[^/]+[:@]))?/, '');
}

export function compareImageRecords(a: ImageRecord, b: ImageRecord): number {
  if (a.compatibility_rank !== b.compatibility_rank) return a.compatibility_rank - b.compatibility_rank;
  const left = `${a.repository}:${a.tag}`;
  const right = `${b.repository}:${b.tag}`;
  return left < right ? -1 : left > right ? 1 : 0;
}

/** An image a compose stack built: its session's alone, so no listing shows it (docs/compose.md). */
function isStackBuilt(image: ImageSummary): boolean {
  return image.labels[STACK_BUILD_LABEL] !== undefined || image.repoTags.some(isBuiltImageReference);
}

export class ImageCatalog {
  private readonly defaultImage: string;

  constructor(private readonly options: ImageCatalogOptions) {
    this.defaultImage = normaliseImageReference(options.policy.defaultImage) ?? options.policy.defaultImage;
  }

  /** Every tagged local image, one record per repository:tag, best rank first. */
  async list(): Promise<ImageRecord[]> {
    const images = (await this.options.runtime.listImages()).filter((image) => this.tagsOf(image).length > 0 && !isStackBuilt(image));
    const records: ImageRecord[] = [];
    for (let i = 0; i < images.length; i += PROBE_CONCURRENCY) {
      const batch = await Promise.all(images.slice(i, i + PROBE_CONCURRENCY).map((image) => this.recordsOfListed(image)));
      records.push(...batch.flat());
    }
    return records.sort(compareImageRecords);
  }

  /** One local image by reference (normalised as for runs: `python:3` is `docker.io/library/python:3`). */
  async get(name: string): Promise<ImageRecord> {
    const parsed = parseImageReference(name);
    if ('error' in parsed) throw errors.invalid(`name: "${name}" is not a valid image reference: ${parsed.error}`);
    const reference = formatImageReference(parsed);
    const info = await this.options.runtime.inspectImage(reference);
    if (!info) throw errors.notFound(`image "${reference}"`);
    const summary: ImageSummary = { id: info.id, repoTags: info.repoTags, size: info.size, labels: info.labels ?? {} };
    if (isStackBuilt(summary) || isBuiltImageReference(reference)) throw errors.notFound(`image "${reference}"`);
    const repository = `${parsed.domain}/${parsed.path}`;
    return this.record(summary, repository, parsed.tag ?? '', name, reference);
  }

  async search(term: string, limit = SEARCH_LIMIT_DEFAULT): Promise<SearchResult[]> {
    checkSearchTerm(term);
    if (!Number.isInteger(limit) || limit < 1 || limit > SEARCH_LIMIT_MAX) {
      throw errors.invalid(`limit: must be a whole number from 1 to ${SEARCH_LIMIT_MAX}`);
    }
    const registry = searchRegistry(term);
    const tlsVerify = registry === undefined || !this.options.policy.insecureRegistries.includes(registry);
    try {
      const results = await this.options.runtime.searchImages(term, { limit, tlsVerify });
      return results.slice(0, limit);
    } catch (error) {
      if (error instanceof RegistryError) throw errors.imageSearchFailed(term, error.message);
      throw error;
    }
  }

  async pull(request: PullRequest, watch: PullWatch = {}): Promise<PullResult> {
    return this.preparePull(request).run(watch);
  }

  /** Checks a pull request (an invalid, disallowed or badly platformed one is a 400, thrown here) before any work. */
  preparePull(request: PullRequest): PreparedPull {
    const plan = planPull(request.image, request.platform, this.options.policy);
    return { reference: plan.reference, run: (watch = {}) => this.runPull(plan, request.quiet ?? false, watch) };
  }

  private async runPull(plan: PullPlan, quiet: boolean, watch: PullWatch): Promise<PullResult> {
    const { onProgress, signal } = watch;
    signal?.throwIfAborted();
    try {
      const pulled = await this.options.runtime.pullImage(plan.reference, {
        tlsVerify: plan.tlsVerify,
        quiet,
        ...(plan.platform ? { platform: plan.platform } : {}),
        ...(signal ? { signal } : {}),
        ...(onProgress
          ? {
              onProgress: (progress) =>
                onProgress({
                  message: progress.message,
                  blobs_started: progress.blobsStarted,
                  ...(progress.blobsDone !== undefined ? { blobs_done: progress.blobsDone } : {}),
                }),
            }
          : {}),
      });
      return { success: true, image_id: pulled.id, image: plan.reference };
    } catch (error) {
      if (error instanceof BerthError || !(error instanceof RegistryError)) throw error;
      if (error.notFound) throw errors.imageNotInRegistry(plan.reference, plan.registry);
      throw errors.imagePullFailed(plan.reference, error.message);
    }
  }

  /**
   * A listed image's records, or none when it was removed between the listing and its probe (another
   * client's `podman rmi`, a compose stack's build removed): the listing shows what exists, not a 500.
   */
  private async recordsOfListed(image: ImageSummary): Promise<ImageRecord[]> {
    try {
      return await this.recordsOf(image);
    } catch (error) {
      if ((await this.options.runtime.inspectImage(image.id).catch(() => 'unknown')) === undefined) return [];
      throw error;
    }
  }

  private tagsOf(image: ImageSummary): string[] {
    return image.repoTags.filter((tag) => !tag.includes('<none>'));
  }

  private recordsOf(image: ImageSummary): Promise<ImageRecord[]> {
    return Promise.all(
      this.tagsOf(image).map((repoTag) => {
        const { repository, tag } = splitRepoTag(repoTag);
        return this.record(image, repository, tag, familiarReference(repoTag), repoTag);
      }),
    );
  }

  private async record(image: ImageSummary, repository: string, tag: string, written: string, normalised: string): Promise<ImageRecord> {
    // Probed by id: the same image under several tags is probed once.
    const facts = await this.options.probe.facts(image.id, image.id);
    const official = image.labels[OFFICIAL_LABEL] === 'official' || image.repoTags.includes(this.defaultImage);
    const { rank, compatible } = rankImage(facts, official);
    return {
      repository,
      tag,
      id: image.id,
      size: image.size,
      compatibility_rank: rank,
      compatible,
      tools: facts.tools,
      allowed: isAllowedImage(written, normalised, this.options.policy),
    };
  }
}

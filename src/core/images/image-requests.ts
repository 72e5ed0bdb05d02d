// The image endpoints' inputs parsed into typed values: the reference to pull (valid, allowed, and with
// the TLS choice of its registry), the platform, and the search term. Each refusal is a 400.
import { errors } from '../../errors.js';
import { formatImageReference, imageMatchesPatterns, normaliseImageReference, parseImageReference } from '../validation/images.js';
import { checkCharacters } from '../validation/text.js';

export interface ImageCatalogPolicy {
  readonly allowedPatterns: readonly string[];
  /** SERVICE_AGENT_IMAGE: always allowed, as for runs. */
  readonly defaultImage: string;
  /** SERVICE_IMAGE_INSECURE_REGISTRIES: hosts (with port) reached without TLS verification. */
  readonly insecureRegistries: readonly string[];
}

export interface Platform {
  readonly os: string;
  readonly arch: string;
  readonly variant?: string;
}

export interface PullPlan {
  /** Fully qualified: what is checked against the allowlist is what Podman pulls. */
  readonly reference: string;
  readonly registry: string;
  readonly tlsVerify: boolean;
  readonly platform: Platform | undefined;
}

export const SEARCH_TERM_MAX_LENGTH = 255;
const PLATFORM = /^([a-z0-9_]+)\/([a-z0-9_]+)(?:\/([a-z0-9_.]+))?$/;

export function isAllowedImage(written: string, normalised: string, policy: Pick<ImageCatalogPolicy, 'allowedPatterns' | 'defaultImage'>): boolean {
  const defaultImage = normaliseImageReference(policy.defaultImage) ?? policy.defaultImage;
  return normalised === defaultImage || imageMatchesPatterns(written, normalised, policy.allowedPatterns);
}

export function planPull(image: string, platform: string | undefined, policy: ImageCatalogPolicy): PullPlan {
  checkCharacters(image, 'image', false);
  const parsed = parseImageReference(image);
  if ('error' in parsed) throw errors.invalid(`image: "${image}" is not a valid image reference: ${parsed.error}`);
  const reference = formatImageReference(parsed);
  if (!isAllowedImage(image, reference, policy)) throw errors.imageNotAllowed(image, 'image');
  return {
    reference,
    registry: parsed.domain,
    tlsVerify: !policy.insecureRegistries.includes(parsed.domain),
    platform: platform === undefined || platform === '' ? undefined : parsePlatform(platform),
  };
}

export function parsePlatform(platform: string): Platform {
  const match = PLATFORM.exec(platform);
  if (!match) throw errors.invalid(`platform: "${platform}" is not a platform such as linux/amd64 or linux/arm64/v8`);
  return { os: match[1]!, arch: match[2]!, ...(match[3] ? { variant: match[3] } : {}) };
}

/** The registry a search term names (`host:port/term`), if any: only it is searched, so only its TLS choice matters. */
export function searchRegistry(term: string): string | undefined {
  const slash = term.indexOf('/');
  if (slash <= 0) return undefined;
  const first = term.slice(0, slash);
  return first.includes('.') || first.includes(':') || first === 'localhost' ? first : undefined;
}

export function checkSearchTerm(term: string): void {
  checkCharacters(term, 'q', false);
  if (term.trim() === '') throw errors.invalid('q: must not be empty');
  if (term.length > SEARCH_TERM_MAX_LENGTH) throw errors.invalid(`q: is longer than ${SEARCH_TERM_MAX_LENGTH} characters`);
}

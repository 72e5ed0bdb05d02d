// Image references: syntax check, normalisation to the fully qualified form, and the
// SERVICE_AGENT_ALLOWED_IMAGE_PATTERNS allowlist. The musl check needs the image itself and is the
// runtime adapter's (it inspects the image before creating the container).
import { errors } from '../../errors.js';
import { checkCharacters } from './text.js';
import { isBuiltImageReference } from '../compose-file/stack-definition.js';

export interface ImageReference {
  /** Registry host, with port if any: `docker.io`, `localhost`, `quay.io`, `registry.example:5000`. */
  readonly domain: string;
  /** Repository path: `library/python`, `berth-agent`, `org/team/tool`. */
  readonly path: string;
  readonly tag: string | undefined;
  readonly digest: string | undefined;
}

export const IMAGE_REFERENCE_MAX_LENGTH = 512;
const NAME_MAX_LENGTH = 255;

// The grammar of github.com/distribution/reference, which Podman and Docker share.
const PATH_COMPONENT = /^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$/;
const DOMAIN = /^(?:(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)(?:\.(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?))*|\[[0-9a-fA-F:]+\])(?::[0-9]+)?$/;
const TAG = /^[\w][\w.-]{0,127}$/;
const DIGEST = /^[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}$/;

/** The reference parsed, or the reason it is not a valid image reference. */
export function parseImageReference(reference: string): ImageReference | { readonly error: string } {
  if (reference === '') return { error: 'it is empty' };
  if (reference.length > IMAGE_REFERENCE_MAX_LENGTH) return { error: `it is longer than ${IMAGE_REFERENCE_MAX_LENGTH} characters` };
  if (/\s/.test(reference)) return { error: 'it contains whitespace' };
  if (reference.startsWith('-')) return { error: 'it starts with "-"' };
  if (reference.includes('..')) return { error: 'it contains ".."' };
  if (reference.includes('://')) return { error: 'transport prefixes such as docker:// are not accepted' };

  const at = reference.indexOf('@');
  const named = at === -1 ? reference : reference.slice(0, at);
  const digest = at === -1 ? undefined : reference.slice(at + 1);
  if (digest !== undefined && !DIGEST.test(digest)) return { error: `"${digest}" is not a digest such as sha256:<64 hex digits>` };

  const lastSlash = named.lastIndexOf('/');
  const colon = named.indexOf(':', lastSlash + 1);
  const name = colon === -1 ? named : named.slice(0, colon);
  const tag = colon === -1 ? undefined : named.slice(colon + 1);
  if (tag !== undefined && !TAG.test(tag)) return { error: `tag "${tag}" is not valid (letters, digits, _ . -, at most 128, not starting with . or -)` };
  if (name.length === 0 || name.length > NAME_MAX_LENGTH) return { error: `the name must be 1 to ${NAME_MAX_LENGTH} characters long` };

  const components = name.split('/');
  const first = components[0]!;
  // As in distribution/reference: the first component is a registry when it looks like a host name.
  const hasDomain = components.length > 1 && (first.includes('.') || first.includes(':') || first === 'localhost' || first !== first.toLowerCase());
  const domain = hasDomain ? first : 'docker.io';
  if (hasDomain && !DOMAIN.test(domain)) return { error: `"${domain}" is not a valid registry host` };
  const pathComponents = hasDomain ? components.slice(1) : components;
  for (const component of pathComponents) {
    if (component !== component.toLowerCase()) return { error: 'repository names must be lowercase' };
    if (!PATH_COMPONENT.test(component)) return { error: `"${component}" is not a valid repository name component` };
  }
  const canonicalDomain = domain === 'index.docker.io' ? 'docker.io' : domain;
  const path = canonicalDomain === 'docker.io' && pathComponents.length === 1 ? `library/${pathComponents[0]}` : pathComponents.join('/');
  return { domain: canonicalDomain, path, tag: tag ?? (digest === undefined ? 'latest' : undefined), digest };
}

export function formatImageReference(reference: ImageReference): string {
  const tag = reference.tag === undefined ? '' : `:${reference.tag}`;
  const digest = reference.digest === undefined ? '' : `@${reference.digest}`;
  return `${reference.domain}/${reference.path}${tag}${digest}`;
}

/**
 * `python:3` → `docker.io/library/python:3`; `localhost/foo` → `localhost/foo:latest`;
 * `python@sha256:…` → `docker.io/library/python@sha256:…`. Undefined when the reference is invalid.
 */
export function normaliseImageReference(reference: string): string | undefined {
  const parsed = parseImageReference(reference);
  return 'error' in parsed ? undefined : formatImageReference(parsed);
}

/**
 * A shell-style pattern as a regular expression: `*` matches any run of characters except `/`,
 * `**` any run including `/`, `?` one character except `/`; every other character stands for itself.
 * So `python:*` cannot match `python.evil.example/x:1`, and `localhost/berth-*` no deeper repository.
 */
export function imagePatternToRegExp(pattern: string): RegExp {
  let source = '';
  for (let i = 0; i < pattern.length; i++) {
    const char = pattern[i]!;
    if (char === '*' && pattern[i + 1] === '*') {
      source += '.*';
      i++;
    } else if (char === '*') source += '[^/]*';
    else if (char === '?') source += '[^/]';
    else source += char.replace(/[\\^$.|+(){}[\]]/g, '\\$&');
  }
  return new RegExp(`^${source}$`);
}

/** A pattern matches the reference as written or its normalised form: `python:*` and `docker.io/library/python:*` both allow `python:3`. */
export function imageMatchesPatterns(written: string, normalised: string, patterns: readonly string[]): boolean {
  if (patterns.length === 0) return true;
  return patterns.some((pattern) => {
    const regexp = imagePatternToRegExp(pattern);
    return regexp.test(written) || regexp.test(normalised);
  });
}

export interface ImagePolicy {
  readonly allowedPatterns: readonly string[];
  /** SERVICE_AGENT_IMAGE: used when the request names none, and always allowed (the operator chose it). */
  readonly defaultImage: string;
}

/**
 * The image to run, normalised (so what was checked is what Podman resolves: a short name cannot be
 * completed from another registry). Throws a 400 for an invalid reference or one no pattern allows.
 */
export function validateImage(image: string | undefined, policy: ImagePolicy, field = 'container.image'): string {
  const defaultImage = normaliseImageReference(policy.defaultImage) ?? policy.defaultImage;
  if (image === undefined) return defaultImage;
  checkCharacters(image, field, false);
  const parsed = parseImageReference(image);
  if ('error' in parsed) throw errors.invalid(`${field}: "${image}" is not a valid image reference: ${parsed.error}`);
  const normalised = formatImageReference(parsed);
  // A stack's built image is its session's alone: the stack uses it by its own tag, never through a request.
  if (isBuiltImageReference(image) || isBuiltImageReference(normalised)) {
    throw errors.invalid(`${field}: "${image}" is an image Berth built for a compose stack; only that stack's session uses it`);
  }
  if (normalised === defaultImage) return normalised;
  if (!imageMatchesPatterns(image, normalised, policy.allowedPatterns)) throw errors.imageNotAllowed(image, field);
  return normalised;
}

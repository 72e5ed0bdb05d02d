// What a caller may ask to clone (POST /workspaces {"git": {"url", "ref"?, "secret"?}}), checked before any
// workspace or container exists. Git takes many strings for a "URL": `ext::sh -c …` runs a command,
// `file://` and plain paths read the host's (here: the image's) files, `fd::` talks to open descriptors,
// and a leading `-` is an option. Only URLs of the four network schemes pass, written the way git and the
// WHATWG parser read alike (printable ASCII, no backslash), and the string git gets is exactly the one
// checked.
import { errors } from '../../errors.js';
import { isReservedSecret, isUsableSecret, type SecretsPolicy } from '../validation/secrets-env.js';

/** A clone request as the API decodes it. */
export interface GitRequest {
  readonly url: string;
  readonly ref?: string;
  readonly secret?: string;
}

/** A clone request that passed every check: safe to hand to git as arguments after `--`. */
export interface GitSource {
  readonly url: string;
  /** A branch or tag name (`git clone --branch`); the remote's default branch when undefined. */
  readonly ref: string | undefined;
  /** The Podman secret holding the password or token (https/http: user `x-access-token`). */
  readonly secret: string | undefined;
}

export const GIT_SCHEMES = ['https', 'http', 'git', 'ssh'] as const;
export const MAX_GIT_URL_LENGTH = 2048;
/** Git's own limit on a ref's length is the file system's name length: a branch name is a path below refs/heads. */
export const MAX_GIT_REF_LENGTH = 255;

/** Printable ASCII without space and backslash: anything else is percent-encoded in a URL. */
const URL_CHARACTERS = /^[\x21-\x5b\x5d-\x7e]+$/;
/** `scheme://` at the very start, lowercase, as git matches its protocol.<name>.allow names. */
const SCHEME_PREFIX = /^([a-z][a-z0-9+.-]*):\/\//;
// eslint-disable-next-line no-control-regex
const CONTROL = /[\x00-\x1f\x7f]/;

/** The I/O-free checks of url, ref and the secret's name (its existence is asked separately). */
export function checkGitRequest(request: GitRequest, policy: SecretsPolicy): GitSource {
  return {
    url: checkGitUrl(request.url),
    ref: request.ref === undefined ? undefined : checkGitRef(request.ref),
    secret: request.secret === undefined ? undefined : checkSecretName(request.secret, policy),
  };
}

export function checkGitUrl(url: string): string {
  const refuse = (why: string) => errors.invalid(`git.url: ${why}`);
  if (url.length === 0) throw refuse('must not be empty');
  if (url.length > MAX_GIT_URL_LENGTH) throw refuse(`is longer than ${MAX_GIT_URL_LENGTH} characters`);
  if (CONTROL.test(url)) throw refuse('contains a control character (a newline, a tab, NUL …)');
  if (url.startsWith('-')) throw refuse('must not start with "-" (git would read it as an option)');
  if (!URL_CHARACTERS.test(url)) throw refuse('may hold only printable ASCII without spaces or backslashes (percent-encode the rest)');
  const scheme = SCHEME_PREFIX.exec(url)?.[1];
  if (scheme === undefined || !(GIT_SCHEMES as readonly string[]).includes(scheme)) {
    throw refuse(`must be a URL of ${GIT_SCHEMES.map((s) => `${s}://`).join(', ')} (transports such as ext::, fd::, file:// and local paths are refused; write scp-like addresses as ssh://user@host/path)`);
  }
  // WHATWG would read `http:///path` as the host `path`; git reads no host at all.
  if (url.charAt(scheme.length + 3) === '/') throw refuse('names no host');
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw refuse('is not a valid URL');
  }
  if (parsed.hostname === '') throw refuse('names no host');
  // ssh gets `user@host` as one argument: neither may pass for an option.
  if (parsed.hostname.startsWith('-') || parsed.username.startsWith('-')) throw refuse('names a host or user starting with "-"');
  if (parsed.password !== '') {
    throw refuse('must not carry a password (it would be kept in the workspace\'s .git/config); name a Podman secret in git.secret instead');
  }
  return url;
}

/**
 * A branch or tag name as `git check-ref-format --branch` accepts it, stricter where git is lenient only
 * for compatibility: no leading `-`, no control characters or space, none of `~ ^ : ? * [ \`, no `..` or
 * `@{`, not `@`, no component starting with `.` or ending with `.lock`, no empty component, no trailing `.`.
 */
export function checkGitRef(ref: string): string {
  const refuse = (why: string) => errors.invalid(`git.ref: ${JSON.stringify(ref.slice(0, 300))} is not a valid branch or tag name: ${why}`);
  if (ref.length === 0) throw refuse('it is empty');
  if (ref.length > MAX_GIT_REF_LENGTH) throw refuse(`it is longer than ${MAX_GIT_REF_LENGTH} characters`);
  if (ref.startsWith('-')) throw refuse('it starts with "-"');
  if (CONTROL.test(ref) || ref.includes(' ')) throw refuse('it contains a space or a control character');
  if (/[~^:?*[\\]/.test(ref)) throw refuse('it contains one of ~ ^ : ? * [ \\');
  if (ref.includes('..')) throw refuse('it contains ".."');
  if (ref.includes('@{') || ref === '@') throw refuse('it contains "@{" or is "@"');
  if (ref.endsWith('.')) throw refuse('it ends with "."');
  for (const component of ref.split('/')) {
    if (component === '') throw refuse('it has an empty component (a leading, trailing or double "/")');
    if (component.startsWith('.')) throw refuse('a component starts with "."');
    if (component.endsWith('.lock')) throw refuse('a component ends with ".lock"');
  }
  return ref;
}

function checkSecretName(secret: string, policy: SecretsPolicy): string {
  if (isUsableSecret(secret, policy)) return secret;
  if (isReservedSecret(secret, policy)) throw errors.invalid(`git.secret: secret "${secret}" is reserved for Berth's own use`);
  throw errors.invalid(`git.secret: ${JSON.stringify(secret.slice(0, 300))} is not a valid secret name (letters, digits, _ . -, starting with a letter or digit, at most 253)`);
}

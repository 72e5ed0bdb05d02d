// The command a workspace-clone container runs: `git clone` of a checked source (git-source.ts) into the
// workspace's tree, configured so that nothing the remote or the URL says can run code or reach a
// transport other than the four network ones, and so that the credential never leaves its file.
import type { GitSource } from './git-source.js';

/** Where the workspace's tree is mounted in the clone container. */
export const CLONE_TREE = '/workspace-tree';
/** Where the credential's Podman secret is mounted as a file (read only by the helper and the redaction). */
export const CREDENTIAL_FILE = '/run/berth/git-credential';
/** The user name given with the secret over http(s): the one GitHub, GitLab and Gitea accept with a token. */
export const CREDENTIAL_USER = 'x-access-token';

/**
 * Answers git's `get` with the user and the secret file's content (command substitution drops the trailing
 * newline). Git runs a helper starting with `!` through the shell with the operation as "$1"; the value
 * itself never appears in an argument, the environment or a file but its own.
 */
const CREDENTIAL_HELPER = `!f() { test "$1" = get || exit 0; printf 'username=${CREDENTIAL_USER}\\npassword=%s\\n' "$(cat ${CREDENTIAL_FILE})"; }; f`;

/**
 * Runs git with the given arguments, its stderr through a filter that replaces the secret file's content
 * (when there is one) by `***` in every line, and exits with git's status: the container's log, which
 * Berth reads for the error line, then never holds the secret even when a remote echoes it back. POSIX sh
 * has no pipefail: git's status comes back through descriptor 3.
 */
const REDACTING_WRAPPER = [
  'exec 4>&1',
  `status=$( { { git "$@" 2>&1 1>&4 4>&-; echo $? >&3; } | BERTH_REDACT="$(cat ${CREDENTIAL_FILE} 2>/dev/null)" awk '`
    + 'BEGIN { s = ENVIRON["BERTH_REDACT"] } '
    + '{ if (s != "") while ((i = index($0, s)) > 0) $0 = substr($0, 1, i - 1) "***" substr($0, i + length(s)); print; fflush() }'
    + "' >&4; } 3>&1 )",
  'exit "$status"',
].join('\n');

/** Git's configuration for the clone, as `-c` options (they win over any file's). */
export function cloneConfig(source: GitSource): string[] {
  const settings = [
    // Only the four network transports: no ext::, fd::, file://, and no local clone of a path.
    'protocol.allow=never',
    'protocol.https.allow=always',
    'protocol.http.allow=always',
    'protocol.git.allow=always',
    'protocol.ssh.allow=always',
    // No hook runs (a template's or anything else's).
    'core.hooksPath=/dev/null',
    // No helper of the image's: only Berth's, and only with a secret.
    'credential.helper=',
    ...(source.secret === undefined
      ? []
      : [
          `credential.helper=${CREDENTIAL_HELPER}`,
          // The credential goes to the host the caller named, never to one a redirect names.
          'http.followRedirects=false',
        ]),
  ];
  return settings.flatMap((setting) => ['-c', setting]);
}

/** `git clone --depth 1 [--branch REF] --no-recurse-submodules -- URL TREE` with the configuration above. */
export function cloneArguments(source: GitSource): string[] {
  return [
    ...cloneConfig(source),
    'clone',
    '--depth',
    '1',
    ...(source.ref === undefined ? [] : ['--branch', source.ref]),
    '--no-recurse-submodules',
    '--',
    source.url,
    CLONE_TREE,
  ];
}

/** The container's command: the redacting wrapper with git's arguments as its positional parameters. */
export function cloneCommand(source: GitSource): string[] {
  return ['sh', '-c', REDACTING_WRAPPER, 'git-clone', ...cloneArguments(source)];
}

/** The environment of the clone: no prompt (there is no terminal), no system or user configuration. */
export const CLONE_ENV: Readonly<Record<string, string>> = Object.freeze({
  GIT_TERMINAL_PROMPT: '0',
  GIT_CONFIG_NOSYSTEM: '1',
  GIT_CONFIG_GLOBAL: '/dev/null',
  GIT_ASKPASS: '/bin/false',
  SSH_ASKPASS: '/bin/false',
});

/**
 * The line of git's output that says why it failed: the last non-empty one, printable characters only,
 * at most 500 of them (it goes into an error message).
 */
export function failureLine(output: string): string {
  const lines = output
    .split(/\r?\n|\r/)
    .map((line) => line.replace(/[\x00-\x1f\x7f]/g, '').trim())
    .filter((line) => line !== '');
  const last = lines.at(-1);
  if (last === undefined) return 'git said nothing';
  return last.length > 500 ? `${last.slice(0, 500)}…` : last;
}

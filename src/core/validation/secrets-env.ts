// container.secrets_env: environment variable name → Podman secret name. Names and values are checked
// without I/O first; existence is asked of the injected secretExists last, after every other layer of the
// request's validation. The reservation rule here also decides what GET /secrets lists.
import { errors } from '../../errors.js';
import type { SecretEnv } from '../run-plan.js';

export const MAX_SECRETS_ENV = 50;

const VARIABLE_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
/** Podman's secret name rule, minus leading punctuation: 1–253 characters of letters, digits, `_ . -`. */
const SECRET_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,252}$/;

/**
 * Variables a caller may not set, compared case-insensitively, with the reason. They either change how
 * the dynamic loader, libc, a language runtime or the shell loads code, or redirect or replace what Berth
 * itself gives the engine (its endpoint, credentials, configuration directory, home), or route the
 * engine's traffic through another host or trust store, which would expose its credentials.
 */
export const BLOCKED_VARIABLES: ReadonlyMap<string, string> = new Map([
  ...['GCONV_PATH', 'GETCONF_DIR', 'HOSTALIASES', 'LOCALDOMAIN', 'LOCPATH', 'MALLOC_TRACE', 'NIS_PATH', 'NLSPATH', 'RESOLV_HOST_CONF', 'RES_OPTIONS', 'GLIBC_TUNABLES']
    .map((name) => [name, 'it changes how the C library loads code or resolves names'] as const),
  ...['NODE_OPTIONS', 'NODE_PATH', 'NODE_EXTRA_CA_CERTS', 'NODE_TLS_REJECT_UNAUTHORIZED', 'SSL_CERT_FILE', 'SSL_CERT_DIR']
    .map((name) => [name, 'it changes how the engine\'s runtime loads code or trusts TLS certificates'] as const),
  ...['BASH_ENV', 'ENV', 'SHELLOPTS', 'BASHOPTS', 'PROMPT_COMMAND', 'PS4', 'IFS', 'PATH', 'SHELL']
    .map((name) => [name, 'it changes what the shell runs'] as const),
  ...['HTTP_PROXY', 'HTTPS_PROXY', 'ALL_PROXY', 'NO_PROXY']
    .map((name) => [name, 'it routes the engine\'s traffic through another host'] as const),
  ...['ANTHROPIC_BASE_URL', 'ANTHROPIC_API_KEY', 'ANTHROPIC_AUTH_TOKEN', 'CLAUDE_CODE_OAUTH_TOKEN', 'CLAUDE_CONFIG_DIR', 'HOME']
    .map((name) => [name, 'Berth sets it for the engine'] as const),
]);

/** Prefixes blocked the same way: the loader's, bash's exported functions, the engine's and Berth's namespaces, the engine's runtime. */
export const BLOCKED_VARIABLE_PREFIXES: ReadonlyMap<string, string> = new Map([
  ['LD_', 'it changes how the dynamic loader loads code'],
  ['BASH_FUNC_', 'it defines shell functions'],
  ['BUN_', 'it changes how the engine\'s runtime runs'],
  ['ANTHROPIC_', 'it configures the engine\'s model endpoint and credentials, which Berth controls'],
  ['CLAUDE_', 'it configures the engine, which Berth controls'],
  ['BERTH_', 'the BERTH_ namespace is reserved for Berth'],
]);

/** Why a variable name is blocked, or undefined when it may be set. */
export function blockedVariableReason(variable: string): string | undefined {
  const upper = variable.toUpperCase();
  const exact = BLOCKED_VARIABLES.get(upper);
  if (exact !== undefined) return exact;
  for (const [prefix, reason] of BLOCKED_VARIABLE_PREFIXES) if (upper.startsWith(prefix)) return reason;
  return undefined;
}

export interface SecretsPolicy {
  /** Secrets Berth uses itself (SERVICE_ENGINE_CREDENTIALS_SECRET); also every name starting with `berth-`. */
  readonly reservedSecrets: readonly string[];
}

/** The policy of a server: its engine credential secret is reserved besides the `berth-` namespace. */
export function secretsPolicy(engine: { readonly credentialsSecret: string }): SecretsPolicy {
  return { reservedSecrets: [engine.credentialsSecret] };
}

/**
 * Secrets Berth keeps for itself: every name starting with `berth-` (the offline model's key, test and
 * future ones), and the configured engine credential.
 */
export function isReservedSecret(name: string, policy: SecretsPolicy): boolean {
  return name.toLowerCase().startsWith('berth-') || policy.reservedSecrets.includes(name);
}

/** Whether a run may name this secret in secrets_env: a valid secret name that Berth does not reserve. */
export function isUsableSecret(name: string, policy: SecretsPolicy): boolean {
  return SECRET_NAME.test(name) && !isReservedSecret(name, policy);
}

/** The I/O-free rules: count, variable names, blocked variables, secret name syntax, reserved secrets. */
export function checkSecretsEnv(secretsEnv: Readonly<Record<string, string>> | undefined, policy: SecretsPolicy): SecretEnv[] {
  if (secretsEnv === undefined) return [];
  const entries = Object.entries(secretsEnv);
  if (entries.length > MAX_SECRETS_ENV) {
    throw errors.invalid(`container.secrets_env: has ${entries.length} entries; at most ${MAX_SECRETS_ENV} are allowed`);
  }
  return entries.map(([variable, secret]) => {
    const field = `container.secrets_env.${variable}`;
    if (!VARIABLE_NAME.test(variable)) {
      throw errors.invalid(`container.secrets_env: ${JSON.stringify(variable)} is not a valid variable name (^[a-zA-Z_][a-zA-Z0-9_]*$)`);
    }
    const blocked = blockedVariableReason(variable);
    if (blocked !== undefined) throw errors.invalid(`${field}: the variable ${variable} is blocked: ${blocked}`);
    if (!SECRET_NAME.test(secret)) {
      throw errors.invalid(`${field}: ${JSON.stringify(secret)} is not a valid secret name (letters, digits, _ . -, starting with a letter or digit, at most 253)`);
    }
    if (isReservedSecret(secret, policy)) {
      throw errors.invalid(`${field}: secret "${secret}" is reserved for Berth's own use`);
    }
    return { variable, secret };
  });
}

/** Each named secret must exist in Podman's store; asked one at a time, in request order. */
export async function checkSecretsExist(secretsEnv: readonly SecretEnv[], secretExists: (name: string) => Promise<boolean>): Promise<void> {
  for (const { variable, secret } of secretsEnv) {
    if (!(await secretExists(secret))) throw errors.secretNotFound(variable, secret);
  }
}

export async function validateSecretsEnv(
  secretsEnv: Readonly<Record<string, string>> | undefined,
  policy: SecretsPolicy,
  secretExists: (name: string) => Promise<boolean>,
): Promise<SecretEnv[]> {
  const checked = checkSecretsEnv(secretsEnv, policy);
  await checkSecretsExist(checked, secretExists);
  return checked;
}

// container.environment: a compose file on the host, read and checked before anything is created. The
// file must lie under SERVICE_AGENT_ALLOWED_VOLUMES (resolved like a volume's host path) and is then read
// without following any link, so the file checked is the file read; its `.env` beside it likewise.
import { posix } from 'node:path';
import type { Config } from '../../config.js';
import { errors } from '../../errors.js';
import { formatDuration, parseDuration } from '../../units.js';
import type { ComposeEnvironmentRequest, EnvironmentPlan } from '../run-plan.js';
import { ComposeFileError, loadComposeDocument, MAX_COMPOSE_FILE_BYTES, parseEnvFile } from '../compose-file/compose-document.js';
import { defineStack, StackDefinitionError } from '../compose-file/stack-definition.js';
import { hostPathPolicy, normaliseAbsolutePath, resolveAllowedHostPath, type HostPathSettings, type RealpathFs } from './volumes.js';

const FIELD = 'container.environment';

/** Reads a host file without following links (runtime/volume-staging.ts readPinnedFile); undefined when missing. */
export type HostFileReader = (path: string, maxBytes: number) => Promise<Buffer | undefined>;

/** The configuration a compose environment is checked against: host paths, compose limits, the containers' maxima. */
export type EnvironmentSettings = HostPathSettings & {
  readonly compose: Pick<Config['compose'], 'allowPrivileged' | 'allowHostNetwork' | 'allowHostVolumes' | 'allowBuild' | 'buildTimeoutMs' | 'healthTimeoutMs'>;
  readonly agent: Pick<Config['agent'], 'maxMemoryBytes' | 'maxCpus'>;
};

export async function validateEnvironment(
  environment: ComposeEnvironmentRequest,
  context: { readonly config: EnvironmentSettings; readonly fs: RealpathFs; readonly readFile: HostFileReader },
): Promise<EnvironmentPlan> {
  const { config } = context;
  if (environment.type !== 'compose') throw errors.invalid(`${FIELD}.type: "${String(environment.type)}" is not supported; the only type is "compose"`);
  const policy = hostPathPolicy(config);
  const resolve = async (path: string, field: string): Promise<string> => {
    const normalised = normaliseAbsolutePath(path, `${field}`);
    return resolveAllowedHostPath({ field, hostPath: normalised, containerPath: '/', readOnly: true, options: [] }, policy, context.fs);
  };
  const composePath = await resolve(environment.path, `${FIELD}.path`);
  const text = await readText(context.readFile, composePath, `${FIELD}.path`);
  if (text === undefined) throw errors.invalid(`${FIELD}.path: "${environment.path}" does not exist`);
  const baseDir = posix.dirname(composePath);
  const envText = await readText(context.readFile, posix.join(baseDir, '.env'), `${FIELD}.path (its .env)`);
  let buildTimeoutMs = config.compose.buildTimeoutMs;
  if (environment.build_timeout !== undefined) {
    const parsed = parseDuration(environment.build_timeout);
    if (parsed === undefined) throw errors.invalid(`${FIELD}.build_timeout: ${JSON.stringify(environment.build_timeout)} is not a duration such as 30s, 5m or 1h`);
    buildTimeoutMs = parsed;
    if (buildTimeoutMs > config.compose.buildTimeoutMs) {
      throw errors.invalid(`${FIELD}.build_timeout: "${environment.build_timeout}" is above this server's maximum of ${formatDuration(config.compose.buildTimeoutMs)} (SERVICE_COMPOSE_BUILD_TIMEOUT)`);
    }
  }
  try {
    const document = loadComposeDocument(text, envText === undefined ? new Map() : parseEnvFile(envText));
    const definition = await defineStack(document, {
      policy: { ...config.compose, maxMemoryBytes: config.agent.maxMemoryBytes, maxCpus: config.agent.maxCpus },
      agentService: environment.service,
      baseDir,
      resolveHostPath: (path, at) => resolve(path, `${FIELD} ${at}`),
    });
    return { composePath, service: environment.service, buildTimeoutMs, healthTimeoutMs: config.compose.healthTimeoutMs, definition };
  } catch (error) {
    if (error instanceof ComposeFileError) throw errors.invalid(`${FIELD}.path: "${environment.path}" ${error.message}`);
    if (error instanceof StackDefinitionError) throw errors.invalid(`${FIELD}: ${error.message}`);
    throw error;
  }
}

async function readText(readFile: HostFileReader, path: string, field: string): Promise<string | undefined> {
  let bytes: Buffer | undefined;
  try {
    bytes = await readFile(path, MAX_COMPOSE_FILE_BYTES);
  } catch (error) {
    throw errors.invalid(`${field}: "${path}" cannot be read: ${(error as Error).message}`);
  }
  if (bytes === undefined) return undefined;
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    throw errors.invalid(`${field}: "${path}" is not UTF-8 text`);
  }
}

// A run request (already shaped by the wire schema) turned into a RunPlan, or refused with a 400 (413 for
// an oversized prompt) naming the field. Layers run in a fixed order: input, volume allowlist, image
// allowlist, container-path blocklist, resource limits, then secrets. Nothing here creates anything.
import type { Config } from '../../config.js';
import { errors } from '../../errors.js';
import type { EnginePlan, EnvironmentPlan, LifecyclePlan, MountOption, RunPlan, SessionIntent } from '../run-plan.js';
import type { ContainerOptions, EngineOptions, RunRequest } from '../run-request.js';
import { validateImage, type ImagePolicy } from './images.js';
import { validateEnvironment, type EnvironmentSettings, type HostFileReader } from './environment.js';
import { blockedVariableReason } from './secrets-env.js';
import { builtImageTag, type StackService } from '../compose-file/stack-definition.js';
import { readPinnedFile } from '../../runtime/volume-staging.js';
import { validateHooksTimeout, validateLimits, type LimitsPolicy } from './limits.js';
import { validateWorkdir } from './paths.js';
import { validateNetwork } from './network.js';
import { workspaceIntent } from './workspace.js';
import { secretsPolicy, validateSecretsEnv } from './secrets-env.js';
import {
  checkHookCommands, checkModel, checkOptionalText, checkPrompt, checkSessionId, checkToolNames, checkWebhookUrl,
} from './text.js';
import {
  checkContainerPath, checkDistinctTargets, checkRelabel, hostPathPolicy, nodeRealpathFs, parseVolumeSpec, resolveAllowedHostPath,
  toVolumeMount, type RealpathFs, type VolumeSpec,
} from './volumes.js';

/** The configuration a run request is checked against: every rule's slice, and the defaults a plan takes from it. */
export type ValidationSettings = Pick<Config, 'maxPromptBytes' | 'egress'> &
  EnvironmentSettings & {
    readonly agent: LimitsPolicy & Pick<Config['agent'], 'defaultWorkdir' | 'allowedImagePatterns' | 'image'>;
    readonly engine: Pick<Config['engine'], 'credentialsSecret'>;
  };

export interface ValidationContext {
  readonly config: ValidationSettings;
  /** Symlink resolution for volume host paths; node:fs/promises when omitted. */
  readonly fs?: RealpathFs;
  /** Whether Podman's secret store has a secret of this name (the runtime adapter answers). */
  secretExists(name: string): Promise<boolean>;
  /** Reads a compose file without following links; readPinnedFile of runtime/volume-staging.ts when omitted. */
  readonly readFile?: HostFileReader;
}

export async function validateRunRequest(request: RunRequest, context: ValidationContext): Promise<RunPlan> {
  const { config } = context;
  const engine: EngineOptions = request.engine ?? {};
  const container: ContainerOptions = request.container ?? {};

  // Input: prompt size and characters, the other texts, session flags, workdir (path traversal).
  const prompt = checkPrompt(request.prompt, config.maxPromptBytes);
  checkOptionalText(engine.system_prompt, 'engine.system_prompt', config.maxPromptBytes);
  checkOptionalText(engine.append_system_prompt, 'engine.append_system_prompt', config.maxPromptBytes);
  checkToolNames(engine.allowed_tools, 'engine.allowed_tools');
  checkToolNames(engine.disallowed_tools, 'engine.disallowed_tools');
  checkModel(engine.model);
  const session = sessionIntent(engine);
  const webhookUrl = checkWebhookUrl(request.webhook_url);
  const requestWorkdir = request.workdir === undefined ? undefined : validateWorkdir(request.workdir);
  if (container.environment !== undefined && container.image !== undefined) {
    throw errors.invalid('container.image: cannot be combined with container.environment; the engine runs in the image of the environment\'s service');
  }
  const hooks = container.lifecycle && {
    onCreate: checkHookCommands(container.lifecycle.on_create_command, 'container.lifecycle.on_create_command'),
    postCreate: checkHookCommands(container.lifecycle.post_create, 'container.lifecycle.post_create'),
    postStart: checkHookCommands(container.lifecycle.post_start, 'container.lifecycle.post_start'),
  };

  // Volume allowlist (host side).
  const fs = context.fs ?? nodeRealpathFs;
  const specs = (container.volumes ?? []).map((spec, index) => parseVolumeSpec(spec, `container.volumes[${index}]`));
  const policy = hostPathPolicy(config);
  const hostPaths: string[] = [];
  for (const spec of specs) {
    checkRelabel(spec, policy);
    hostPaths.push(await resolveAllowedHostPath(spec, policy, fs));
  }
  const environment = container.environment && await validateEnvironment(container.environment, { config, fs, readFile: context.readFile ?? readPinnedFile });
  const agentService = environment?.definition.agent;
  const workdir = requestWorkdir !== undefined
    ? requestWorkdir
    : agentService?.workingDir !== undefined
      ? validateWorkdir(agentService.workingDir, `container.environment: services.${agentService.name}.working_dir`)
      : validateWorkdir(config.agent.defaultWorkdir, 'SERVICE_AGENT_DEFAULT_WORKDIR');

  const imagePolicy = { allowedPatterns: config.agent.allowedImagePatterns, defaultImage: config.agent.image };
  const image = environment ? environmentImages(environment, imagePolicy) : validateImage(container.image, imagePolicy);

  // Container-path blocklist (the agent service's mounts are the engine container's too).
  specs.forEach(checkContainerPath);
  const serviceMounts = agentService ? agentServiceMounts(agentService) : [];
  checkDistinctTargets([...specs, ...serviceMounts]);
  if (agentService) checkAgentEnvironment(agentService);

  const workspace = workspaceIntent(request.workspace, session, workdir, [...specs, ...serviceMounts].map((mount) => mount.containerPath));

  const limits = validateLimits(container, config.agent);
  const lifecycle: LifecyclePlan | undefined = hooks && {
    ...hooks,
    timeoutMs: validateHooksTimeout(container.lifecycle?.hooks_timeout, config.agent),
  };

  const secretsEnv = await validateSecretsEnv(
    container.secrets_env,
    secretsPolicy(config.engine),
    (name) => context.secretExists(name),
  );

  return {
    prompt,
    workdir,
    session,
    workspace,
    engine: enginePlan(engine),
    container: {
      image,
      volumes: [
        ...specs.map((spec, index) => toVolumeMount(spec, hostPaths[index]!)),
        ...serviceMounts.filter((mount) => mount.kind === 'bind').map((mount) => toVolumeMount(mount, mount.hostPath)),
      ],
      secretsEnv,
      ...limits,
      ...(lifecycle && { lifecycle }),
      ...(environment && { environment }),
      network: validateNetwork(container.network, config),
    },
    webhookUrl,
  };
}

/**
 * The image of every service checked against the allowlist; the engine's is the agent service's, or the
 * image Berth builds for it (named by the definition, so the plan knows it before the build).
 */
function environmentImages(environment: EnvironmentPlan, policy: ImagePolicy): string {
  const { definition } = environment;
  const checked = (service: StackService): string => {
    if (service.image.kind === 'build') return builtImageTag(definition, service.name);
    return validateImage(service.image.reference, policy, `container.environment: services.${service.name}.image`);
  };
  definition.sidecars.forEach(checked);
  return checked(definition.agent);
}

/** The agent service's mounts as the engine container gets them, each checked like a request volume. */
function agentServiceMounts(service: StackService): (VolumeSpec & { kind: 'bind' | 'volume'; hostPath: string })[] {
  return service.mounts.map((mount, index) => {
    const spec = {
      kind: mount.kind,
      field: `container.environment: services.${service.name}.volumes[${index}]`,
      hostPath: mount.kind === 'bind' ? mount.hostPath : mount.volume,
      containerPath: mount.containerPath,
      readOnly: mount.readOnly,
      options: [] as MountOption[],
    };
    checkContainerPath(spec);
    return spec;
  });
}

/** The agent service's environment reaches the engine's process: the variables blocked for secrets_env are refused. */
function checkAgentEnvironment(service: StackService): void {
  for (const name of Object.keys(service.environment)) {
    const reason = blockedVariableReason(name);
    if (reason !== undefined) throw errors.invalid(`container.environment: services.${service.name}.environment.${name} is blocked: ${reason}`);
  }
}

/**
 * The session flags folded into one intent. resume or fork_session need session_id (fork wins when both
 * are set); session_id needs one of them; continue excludes both; no_persistence excludes all three.
 */
export function sessionIntent(engine: EngineOptions): SessionIntent {
  const sessionId = checkSessionId(engine.session_id);
  const resume = engine.resume === true;
  const fork = engine.fork_session === true;
  const continueLast = engine.continue === true;
  if (engine.no_persistence === true && (resume || fork || continueLast)) {
    throw errors.invalid('engine.no_persistence: cannot be combined with resume, fork_session or continue (an ephemeral run has no session to continue)');
  }
  if (continueLast && (resume || fork)) {
    throw errors.invalid('engine.continue: cannot be combined with resume or fork_session; use continue for the most recent session, or session_id with resume or fork_session');
  }
  if ((resume || fork) && sessionId === undefined) {
    throw errors.invalid(`engine.${fork ? 'fork_session' : 'resume'}: requires engine.session_id`);
  }
  if (sessionId !== undefined && !resume && !fork) {
    throw errors.invalid('engine.session_id: is set but neither resume nor fork_session is; set resume to continue that session or fork_session to branch from it');
  }
  if (fork) return { kind: 'fork', fromSessionId: sessionId! };
  if (resume) return { kind: 'resume', sessionId: sessionId! };
  if (continueLast) return { kind: 'continue' };
  if (engine.no_persistence === true) return { kind: 'ephemeral' };
  return { kind: 'new' };
}

function enginePlan(engine: EngineOptions): EnginePlan {
  const { session_id: _sessionId, resume: _resume, continue: _continue, fork_session: _fork, no_persistence: _ephemeral, json_schema, ...rest } = engine;
  // Nobody can answer a permission prompt inside a container, so skipping them is the default.
  return {
    ...rest,
    ...(json_schema !== undefined ? { json_schema: jsonSchemaObject(json_schema) } : {}),
    dangerously_skip_permissions: engine.dangerously_skip_permissions ?? true,
  };
}

/** engine.json_schema as the object it names: clients send it as an object or as that object's JSON text. */
function jsonSchemaObject(schema: Record<string, unknown> | string): Record<string, unknown> {
  if (typeof schema !== 'string') return schema;
  let parsed: unknown;
  try {
    parsed = JSON.parse(schema);
  } catch (error) {
    throw errors.invalid(`engine.json_schema: the string is not valid JSON (${(error as Error).message})`);
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw errors.invalid('engine.json_schema: the string must hold a JSON object (a JSON Schema)');
  }
  return parsed as Record<string, unknown>;
}

// A run request (already shaped by the wire schema) turned into a RunPlan, or refused with a 400 (413 for
// an oversized prompt) naming the field. Layers run in a fixed order: input, volume allowlist, image
// allowlist, container-path blocklist, resource limits, then secrets. Nothing here creates anything.
import type { Config } from '../../config.js';
import { errors } from '../../errors.js';
import type { EnginePlan, LifecyclePlan, RunPlan, SessionIntent } from '../run-plan.js';
import type { ContainerOptions, EngineOptions, RunRequest } from '../run-request.js';
import { validateImage } from './images.js';
import { validateHooksTimeout, validateLimits } from './limits.js';
import { validateWorkdir } from './paths.js';
import { secretsPolicy, validateSecretsEnv } from './secrets-env.js';
import {
  checkHookCommands, checkModel, checkOptionalText, checkPrompt, checkSessionId, checkToolNames, checkWebhookUrl,
} from './text.js';
import {
  checkContainerPath, checkDistinctTargets, checkRelabel, hostPathPolicy, nodeRealpathFs, parseVolumeSpec, resolveAllowedHostPath,
  toVolumeMount, type RealpathFs,
} from './volumes.js';

export interface ValidationContext {
  readonly config: Config;
  /** Symlink resolution for volume host paths; node:fs/promises when omitted. */
  readonly fs?: RealpathFs;
  /** Whether Podman's secret store has a secret of this name (the runtime adapter answers). */
  secretExists(name: string): Promise<boolean>;
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
  const workdir = request.workdir === undefined
    ? validateWorkdir(config.agent.defaultWorkdir, 'SERVICE_AGENT_DEFAULT_WORKDIR')
    : validateWorkdir(request.workdir);
  if (container.environment !== undefined) {
    throw errors.invalid('container.environment: compose environments are not supported by this Berth version');
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

  const image = validateImage(container.image, { allowedPatterns: config.agent.allowedImagePatterns, defaultImage: config.agent.image });

  // Container-path blocklist.
  specs.forEach(checkContainerPath);
  checkDistinctTargets(specs);

  const limits = validateLimits(container, config);
  const lifecycle: LifecyclePlan | undefined = hooks && {
    ...hooks,
    timeoutMs: validateHooksTimeout(container.lifecycle?.hooks_timeout, config),
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
    engine: enginePlan(engine),
    container: {
      image,
      volumes: specs.map((spec, index) => toVolumeMount(spec, hostPaths[index]!)),
      secretsEnv,
      ...limits,
      ...(lifecycle && { lifecycle }),
    },
    webhookUrl,
  };
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

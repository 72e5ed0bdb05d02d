// The wire shape of a run request (POST /run, /run/async, /agents), as a JSON schema.
// Fastify validates bodies against it and the OpenAPI document is generated from it, so this is the
// single source of the request's shape; the finer rules (paths, allowlists, characters, limits) are in
// core/validation and run after it.
import { Type, type Static } from '@sinclair/typebox';

const Flag = (description: string) => Type.Optional(Type.Boolean({ description }));
const Text = (description: string) => Type.Optional(Type.String({ description }));

export const EngineOptionsSchema = Type.Object(
  {
    session_id: Text('Session to resume or fork (UUID).'),
    resume: Flag('Continue the session named by session_id. Default false.'),
    continue: Flag('Continue the most recent session of the same workdir. Default false.'),
    fork_session: Flag('Start a new session branched from session_id. Default false.'),
    no_persistence: Flag('Run without saving any session data. Default false.'),
    model: Text('Model name or alias, e.g. sonnet, opus, haiku.'),
    system_prompt: Text('Replaces the default system prompt.'),
    append_system_prompt: Text('Appended to the system prompt.'),
    allowed_tools: Type.Optional(Type.Array(Type.String(), { maxItems: 200, description: 'Tool allowlist.' })),
    disallowed_tools: Type.Optional(Type.Array(Type.String(), { maxItems: 200, description: 'Tool denylist.' })),
    output_format: Type.Optional(
      Type.Union([Type.Literal('text'), Type.Literal('json'), Type.Literal('stream-json')], {
        description: 'text (default): output is the final answer; json: the same, plus structured_output when json_schema is given; stream-json: output is the engine\'s raw stream-json lines.',
      }),
    ),
    json_schema: Type.Optional(
      Type.Union(
        [
          Type.Object({}, { additionalProperties: true }),
          Type.String({ maxLength: 1_048_576, description: 'The same JSON Schema object, serialised as a JSON string.' }),
        ],
        { description: 'A JSON Schema object (or that object as a JSON string); with output_format json the engine returns structured_output matching it.' },
      ),
    ),
    max_budget_usd: Type.Optional(Type.Number({ exclusiveMinimum: 0, maximum: 1_000_000, description: 'Maximum cost in USD.' })),
    max_turns: Type.Optional(Type.Integer({ minimum: 0, maximum: 100_000, description: 'Maximum agentic turns; 0 = unlimited.' })),
    effort: Type.Optional(
      Type.Union(['low', 'medium', 'high', 'xhigh', 'max'].map((v) => Type.Literal(v)), { description: 'Reasoning effort.' }),
    ),
    dangerously_skip_permissions: Flag('Skip permission prompts (--dangerously-skip-permissions). Default true: there is no one to answer them in a container.'),
    prompt_caching_ttl: Type.Optional(Type.Union([Type.Literal('5m'), Type.Literal('1h')], { description: 'Prompt caching TTL.' })),
    bedrock_service_tier: Type.Optional(
      Type.Union([Type.Literal('default'), Type.Literal('flex'), Type.Literal('priority')], { description: 'Bedrock service tier.' }),
    ),
    enable_powershell_tool: Flag('Enable the PowerShell tool (no effect in Linux containers). Default false.'),
  },
  { additionalProperties: false, description: 'Options of the engine (Claude Code), each mapped to one of its flags or environment switches.' },
);

const HookCommand = (when: string) =>
  Type.Optional(
    Type.Array(Type.String(), {
      maxItems: 64,
      description: `One command as its argument vector, e.g. ["npm", "ci"]; every argument is shell-escaped (write ["sh", "-c", "…"] for a shell). ${when}`,
    }),
  );

export const LifecycleSchema = Type.Object(
  {
    on_create_command: HookCommand('Runs on a session\'s first run only (not on resume or fork).'),
    post_create: HookCommand('Runs after on_create_command, on a session\'s first run only.'),
    post_start: HookCommand('Runs on every run, resumed ones included, after the other two.'),
    hooks_timeout: Text('Time all hooks of a run may take together, e.g. 2m. Default 5m; exit code 124 means it was reached.'),
  },
  { additionalProperties: false, description: 'Commands run in the container before the engine starts, with the run\'s secrets_env variables; the first that fails stops the run (500).' },
);

export const ComposeEnvironmentSchema = Type.Object(
  {
    type: Type.Literal('compose', { description: 'The only type.' }),
    path: Type.String({ maxLength: 4096, description: 'The compose file on the host; it must lie under SERVICE_AGENT_ALLOWED_VOLUMES. Its .env beside it feeds interpolation.' }),
    service: Type.String({ maxLength: 63, description: 'The service the engine runs in (its image, environment, volumes and working_dir).' }),
    build_timeout: Type.Optional(Type.String({ description: 'Time the stack\'s image builds may take, e.g. 15m; default and maximum SERVICE_COMPOSE_BUILD_TIMEOUT.' })),
  },
  {
    additionalProperties: false,
    description:
      'Compose environment: the run\'s session gets a stack of the file\'s services (one per session, reused by its later runs, a fork gets its own), every service healthy before the engine starts in `service`. Refused (400): privileged services, host network/PID/IPC, bind mounts and weakening security options unless the server allows them, unsupported keys (named). See docs/compose.md.',
  },
);

export const NetworkSchema = Type.Object(
  {
    mode: Type.Optional(
      Type.Union([Type.Literal('none'), Type.Literal('allowlist'), Type.Literal('open')], {
        description: 'none: no host at all; allowlist (default): only the hosts in allow; open: any public host (only where SERVICE_EGRESS_ALLOW_OPEN=true). The model gateway is reachable in every mode; loopback, private, link-local and metadata addresses in none.',
      }),
    ),
    allow: Type.Optional(
      Type.Array(Type.String({ maxLength: 260 }), {
        maxItems: 64,
        description: 'Hosts the run may reach through the egress proxy (HTTP, and HTTPS via CONNECT): "name", "*.name" (subdomains), either with ":port" (without one: ports 80 and 443). Default SERVICE_EGRESS_DEFAULT_ALLOW; each must be covered by SERVICE_EGRESS_ALLOWED_HOSTS when the server sets it. Only with mode allowlist.',
      }),
    ),
  },
  {
    additionalProperties: false,
    description: 'Egress policy: the container has no route out; HTTP_PROXY/HTTPS_PROXY point at Berth\'s egress proxy, which admits only what this allows (docs/egress.md).',
  },
);

export const ContainerOptionsSchema = Type.Object(
  {
    image: Text('Base image; the default agent image when omitted. Must match SERVICE_AGENT_ALLOWED_IMAGE_PATTERNS when that is set, be present on the host (Berth never pulls implicitly) and be glibc-based (Alpine/musl images are refused).'),
    volumes: Type.Optional(
      Type.Array(Type.String(), {
        maxItems: 64,
        description: 'host_path:container_path[:options]. The host path (symlinks resolved) must be allowed by SERVICE_AGENT_ALLOWED_VOLUMES (none by default); system and Berth paths such as /etc or /opt/claude are refused as container paths; options: ro, rw, noexec, nosuid, nodev (z and Z only where the server allows relabelling).',
      }),
    ),
    secrets_env: Type.Optional(
      Type.Record(Type.String(), Type.String(), { description: 'Environment variable name → Podman secret name (at most 50).' }),
    ),
    timeout: Text('Maximum runtime, e.g. 5m, 1h. Default 30m.'),
    memory: Text('Memory limit, e.g. 512m, 2g. Default 512m.'),
    disk: Text('Disk limit, e.g. 1g: everything the run can write (workdir, /tmp, /var/tmp, HOME, the engine\'s config dir) is on a file system of this size of its own, and a write beyond it fails with "No space left on device"; the image\'s root file system is read-only. Caller volumes are not counted. Default SERVICE_AGENT_DEFAULT_DISK (2g), at most SERVICE_AGENT_MAX_DISK.'),
    cpus: Type.Optional(Type.Union([Type.String(), Type.Number()], { description: 'CPU limit, e.g. "0.5", "2". Default 1.' })),
    cpu_shares: Type.Optional(Type.Integer({ description: 'Relative CPU weight. Default 1024.' })),
    lifecycle: Type.Optional(LifecycleSchema),
    environment: Type.Optional(ComposeEnvironmentSchema),
    network: Type.Optional(NetworkSchema),
  },
  { additionalProperties: false, description: 'Options of the container the engine runs in.' },
);

export const RunRequestSchema = Type.Object(
  {
    prompt: Type.String({ description: 'Text given to the agent. Required and non-empty.' }),
    workdir: Text('Working directory inside the container (absolute, shell-safe). Default /workspace.'),
    workspace: Text(
      'A workspace of the caller (UUID, POST /workspaces) mounted read-write at the workdir. A new session started with it keeps using it on resume and continue; a new session without one gets a workspace of its own, a fork a copy of its parent\'s. One run or agent at a time per workspace (409).',
    ),
    webhook_url: Text('Async runs only: URL notified when the job reaches a terminal state.'),
    engine: Type.Optional(EngineOptionsSchema),
    container: Type.Optional(ContainerOptionsSchema),
  },
  { additionalProperties: false },
);

export type EngineOptions = Static<typeof EngineOptionsSchema>;
export type ContainerOptions = Static<typeof ContainerOptionsSchema>;
export type RunRequest = Static<typeof RunRequestSchema>;

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
  { additionalProperties: false },
);

export const LifecycleSchema = Type.Object(
  {
    on_create_command: Type.Optional(Type.Array(Type.String(), { maxItems: 64 })),
    post_create: Type.Optional(Type.Array(Type.String(), { maxItems: 64 })),
    post_start: Type.Optional(Type.Array(Type.String(), { maxItems: 64 })),
    hooks_timeout: Type.Optional(Type.String()),
  },
  { additionalProperties: false },
);

export const ComposeEnvironmentSchema = Type.Object(
  {
    type: Type.Literal('compose'),
    path: Type.String(),
    service: Type.String(),
    build_timeout: Type.Optional(Type.String()),
  },
  { additionalProperties: false },
);

export const ContainerOptionsSchema = Type.Object(
  {
    image: Text('Base image; the default agent image when omitted. Must be glibc-based.'),
    volumes: Type.Optional(Type.Array(Type.String(), { maxItems: 64, description: 'host_path:container_path[:options]' })),
    secrets_env: Type.Optional(
      Type.Record(Type.String(), Type.String(), { description: 'Environment variable name → Podman secret name (at most 50).' }),
    ),
    timeout: Text('Maximum runtime, e.g. 5m, 1h. Default 30m.'),
    memory: Text('Memory limit, e.g. 512m, 2g. Default 512m.'),
    cpus: Type.Optional(Type.Union([Type.String(), Type.Number()], { description: 'CPU limit, e.g. "0.5", "2". Default 1.' })),
    cpu_shares: Type.Optional(Type.Integer({ description: 'Relative CPU weight. Default 1024.' })),
    lifecycle: Type.Optional(LifecycleSchema),
    environment: Type.Optional(ComposeEnvironmentSchema),
  },
  { additionalProperties: false },
);

export const RunRequestSchema = Type.Object(
  {
    prompt: Type.String({ description: 'Text given to the agent. Required and non-empty.' }),
    workdir: Text('Working directory inside the container (absolute, shell-safe). Default /workspace.'),
    webhook_url: Text('Async runs only: URL notified when the job reaches a terminal state.'),
    engine: Type.Optional(EngineOptionsSchema),
    container: Type.Optional(ContainerOptionsSchema),
  },
  { additionalProperties: false },
);

export type EngineOptions = Static<typeof EngineOptionsSchema>;
export type ContainerOptions = Static<typeof ContainerOptionsSchema>;
export type RunRequest = Static<typeof RunRequestSchema>;

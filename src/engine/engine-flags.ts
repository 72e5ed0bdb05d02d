// What the engine's command line is built from, in the engine's own terms: the engine options of a
// validated run (core's EnginePlan is assignable to EngineFlags) and its lifecycle hooks.

export interface EngineFlags {
  readonly model?: string;
  readonly system_prompt?: string;
  readonly append_system_prompt?: string;
  readonly allowed_tools?: readonly string[];
  readonly disallowed_tools?: readonly string[];
  readonly json_schema?: unknown;
  readonly max_budget_usd?: number;
  readonly max_turns?: number;
  readonly effort?: string;
  readonly dangerously_skip_permissions?: boolean;
  readonly prompt_caching_ttl?: '5m' | '1h';
  readonly bedrock_service_tier?: string;
  readonly enable_powershell_tool?: boolean;
}

/**
 * Each hook is one command given as its argument vector (`["npm", "install"]`); every argument is
 * shell-escaped, so no argument is ever parsed as shell syntax. Empty vectors mean "no hook".
 */
export interface LifecycleHooks {
  /** on_create_command: run once when the session is first created; skipped on resume and fork. */
  readonly onCreate: readonly string[];
  readonly postCreate: readonly string[];
  /** Run on every container start, including resume. */
  readonly postStart: readonly string[];
  /** hooks_timeout: default 5m, at most SERVICE_AGENT_MAX_TIMEOUT. */
  readonly timeoutMs: number;
}

// The engine's command line and environment for one run, from validated options. Every engine option of
// the API maps to one real flag or environment switch of Claude Code (docs/runs.md, "Engine options and what they become").
// User text (prompt, system prompts) never appears in argv: it is uploaded as files, so no character of
// it can be taken as a flag or a shell word, and its size is not bounded by the kernel's argv limits.
import type { EngineFlags, LifecycleHooks } from './engine-flags.js';
import { ENGINE_CONFIG_DIR, GATEWAY_ENV_FILE, INPUT_DIR, PROMPT_FILE, SECRET_ENV_DIR, AGENT_INPUT_FIFO } from './layout.js';

/** How the engine should treat sessions, with ids already chosen by Berth. */
export type EngineSession =
  | { readonly kind: 'new'; readonly sessionId: string }
  | { readonly kind: 'resume'; readonly sessionId: string }
  | { readonly kind: 'fork'; readonly fromSessionId: string; readonly sessionId: string }
  | { readonly kind: 'ephemeral'; readonly sessionId: string };

export interface EngineInvocation {
  /** The container's command: a fixed shell script plus the engine's argv as positional parameters. */
  readonly command: readonly string[];
  readonly env: Readonly<Record<string, string>>;
  /** Files to upload to INPUT_DIR before start (name → content). */
  readonly inputFiles: Readonly<Record<string, string>>;
}

export const HOOKS_FILE = `${INPUT_DIR}/hooks.sh`;
/** Exit code of the launch script when a lifecycle hook fails (124 from `timeout` inside means hooks_timeout). */
export const HOOK_FAILED_EXIT_CODE = 86;

// Exports each secret file as a variable, then the gateway's variables (after the caller's secrets, so
// that none of them can point the engine elsewhere; before the hooks, so that `npm ci` goes through the
// egress proxy too), runs the lifecycle hooks (if any) with their output on stderr so the engine's stdout
// stays pure stream-json, then execs the engine with the prompt on stdin.
// The script is a constant: caller-controlled values reach it only as "$@" and as files.
const LAUNCH_SCRIPT = [
  `for f in ${SECRET_ENV_DIR}/*; do [ -f "$f" ] && export "\${f##*/}=$(cat "$f")"; done`,
  `if [ -f ${GATEWAY_ENV_FILE} ]; then while IFS= read -r line || [ -n "$line" ]; do [ -n "$line" ] && export "$line"; done < ${GATEWAY_ENV_FILE}; fi`,
  `if [ -f ${HOOKS_FILE} ]; then`,
  `  if command -v timeout >/dev/null 2>&1; then timeout -k 5 "$BERTH_HOOKS_TIMEOUT" /bin/sh -e ${HOOKS_FILE} >&2; else /bin/sh -e ${HOOKS_FILE} >&2; fi`,
  `  rc=$?; if [ "$rc" != 0 ]; then echo "berth: lifecycle hook failed with exit code $rc" >&2; exit ${HOOK_FAILED_EXIT_CODE}; fi`,
  'fi',
  `exec "$@" < ${PROMPT_FILE}`,
].join('\n');

// The same script for a pre-started engine of the runs' pool: the engine reads the container's stdin
// (attached by Berth), where its one prompt arrives as a stream-json line, then its end.
const INTERACTIVE_LAUNCH_SCRIPT = LAUNCH_SCRIPT.replace(`exec "$@" < ${PROMPT_FILE}`, 'exec "$@"');

// A persistent agent's engine reads its turns from the FIFO in its input directory, opened read-write
// (`<>`): the engine itself holds a writer, so it never reads an end of input, whether or not a Berth
// process is writing (a restarted Berth opens the FIFO again). It ends when it is signalled.
const AGENT_LAUNCH_SCRIPT = LAUNCH_SCRIPT.replace(`exec "$@" < ${PROMPT_FILE}`, `exec "$@" <> ${AGENT_INPUT_FIFO}`);

/**
 * The variables of GATEWAY_ENV_FILE for a container with this per-run token: the model gateway's credential
 * (the engine sends it as its API key; the gateway puts the real one in its place) and the egress proxy, as
 * both the upper- and lower-case names tools look for. The gateway itself is reached directly.
 */
export function gatewayEnvironment(gatewayUrl: string, token: string): Record<string, string> {
  const url = new URL(gatewayUrl);
  const proxy = `http://berth:${token}@${url.host}`;
  const direct = [url.hostname, 'localhost', '127.0.0.1'].join(',');
  return {
    ANTHROPIC_API_KEY: token,
    HTTP_PROXY: proxy,
    HTTPS_PROXY: proxy,
    http_proxy: proxy,
    https_proxy: proxy,
    NO_PROXY: direct,
    no_proxy: direct,
  };
}

/** The content of GATEWAY_ENV_FILE: `NAME=value` lines (no value holds a newline or needs quoting). */
export function gatewayEnvFile(variables: Readonly<Record<string, string>>): string {
  return Object.entries(variables).map(([name, value]) => {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name) || /[\n\r\0]/.test(value)) throw new Error(`${name}: not a variable for the gateway's file`);
    return `${name}=${value}\n`;
  }).join('');
}

/** `it's` → `'it'\''s'`: a word the shell takes literally, whatever it contains. */
export function shellQuote(argument: string): string {
  return `'${argument.replace(/'/g, `'\\''`)}'`;
}

/** The hooks that apply to this start, as a script of shell-escaped commands; undefined when none. */
export function hooksScript(lifecycle: LifecycleHooks | undefined, firstStart: boolean): string | undefined {
  if (!lifecycle) return undefined;
  const commands = [...(firstStart ? [lifecycle.onCreate, lifecycle.postCreate] : []), lifecycle.postStart].filter((argv) => argv.length > 0);
  if (commands.length === 0) return undefined;
  return `${commands.map((argv) => argv.map(shellQuote).join(' ')).join('\n')}\n`;
}

export function buildEngineInvocation(options: {
  engine: EngineFlags;
  session: EngineSession;
  prompt: string;
  modelBaseUrl: string;
  offlineModel: boolean;
  lifecycle?: LifecycleHooks;
  /** The engine executable inside the container (mounted at /opt/claude, or the image's own). */
  engineBinary: string;
  /**
   * A persistent agent: turns arrive on stdin as stream-json lines (`--input-format stream-json`), so
   * there is no prompt file and no partial-message events; options.prompt is ignored.
   */
  interactive?: boolean;
  /**
   * A pre-started engine of the pool (core/pool): like a one-shot run of a new session, but the one prompt
   * arrives later on stdin as a stream-json line (options.prompt is ignored).
   */
  pooled?: boolean;
}): EngineInvocation {
  const { engine, session } = options;
  const pooled = options.pooled === true;
  const interactive = options.interactive === true || pooled;
  const args: string[] = options.interactive === true
    ? [options.engineBinary, '-p', '--input-format', 'stream-json', '--output-format', 'stream-json', '--verbose']
    : [options.engineBinary, '-p', ...(pooled ? ['--input-format', 'stream-json'] : []), '--output-format', 'stream-json', '--verbose', '--include-partial-messages'];
  const inputFiles: Record<string, string> = interactive ? {} : { prompt: options.prompt };

  switch (session.kind) {
    case 'new':
      // Its title is Berth's to record (engine/session-title.ts), not the engine's.
      args.push('--session-id', session.sessionId);
      break;
    case 'resume':
      args.push('--resume', session.sessionId);
      break;
    case 'fork':
      args.push('--resume', session.fromSessionId, '--fork-session', '--session-id', session.sessionId);
      break;
    case 'ephemeral':
      args.push('--session-id', session.sessionId, '--no-session-persistence');
      break;
  }

  if (engine.model !== undefined) args.push('--model', engine.model);
  if (engine.system_prompt !== undefined) {
    inputFiles['system-prompt'] = engine.system_prompt;
    args.push('--system-prompt-file', `${INPUT_DIR}/system-prompt`);
  }
  if (engine.append_system_prompt !== undefined) {
    inputFiles['append-system-prompt'] = engine.append_system_prompt;
    args.push('--append-system-prompt-file', `${INPUT_DIR}/append-system-prompt`);
  }
  for (const tool of engine.allowed_tools ?? []) args.push('--allowedTools', tool);
  for (const tool of engine.disallowed_tools ?? []) args.push('--disallowedTools', tool);
  if (engine.json_schema !== undefined) args.push('--json-schema', JSON.stringify(engine.json_schema));
  // engine.max_budget_usd is enforced by Berth's model gateway, outside the container (core/gateway/budgets.ts):
  // the engine's own --max-budget-usd is code in the container, and it stopped the engine after the request
  // that crossed the budget, before the gateway could refuse the next one and the run end naming the limit.
  if (engine.max_turns !== undefined && engine.max_turns > 0) args.push('--max-turns', String(engine.max_turns));
  if (engine.effort !== undefined) args.push('--effort', engine.effort);
  if (engine.dangerously_skip_permissions !== false) args.push('--dangerously-skip-permissions');

  const env: Record<string, string> = {
    ANTHROPIC_BASE_URL: options.modelBaseUrl,
    CLAUDE_CONFIG_DIR: ENGINE_CONFIG_DIR,
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
    // Root-run images need it for --dangerously-skip-permissions; harmless for a non-root user.
    IS_SANDBOX: '1',
  };
  // The offline model answers at once or fails on purpose: retrying would only hide the failure.
  if (options.offlineModel) env.CLAUDE_CODE_MAX_RETRIES = '0';
  if (engine.prompt_caching_ttl === '1h') env.ENABLE_PROMPT_CACHING_1H = '1';
  if (engine.prompt_caching_ttl === '5m') env.FORCE_PROMPT_CACHING_5M = '1';
  if (engine.bedrock_service_tier !== undefined) env.ANTHROPIC_BEDROCK_SERVICE_TIER = engine.bedrock_service_tier;
  if (engine.enable_powershell_tool === true) env.CLAUDE_CODE_USE_POWERSHELL_TOOL = '1';

  // on_create_command and post_create belong to a session's first start: new and throw-away sessions.
  const hooks = hooksScript(options.lifecycle, session.kind === 'new' || session.kind === 'ephemeral');
  if (hooks !== undefined && options.lifecycle) {
    inputFiles['hooks.sh'] = hooks;
    env.BERTH_HOOKS_TIMEOUT = String(Math.max(1, Math.ceil(options.lifecycle.timeoutMs / 1000)));
  }

  const script = options.interactive === true ? AGENT_LAUNCH_SCRIPT : interactive ? INTERACTIVE_LAUNCH_SCRIPT : LAUNCH_SCRIPT;
  return { command: ['/bin/sh', '-c', script, 'berth-launch', ...args], env, inputFiles };
}

// Berth's tools for MCP clients, in one list shared by both ways Berth is served over MCP: `berth mcp`
// (stdio; the SDK client of the CLI's login) and Berth's own `/mcp` route (streamable HTTP; an SDK client
// whose every request is the HTTP caller's own, src/http/routes/mcp.ts). Each tool is one or two calls of
// the SDK (@berth/client) and nothing else, so a tool can do exactly what its caller could do with the API:
// the same validation, ownership (another caller's session, job, agent or workspace is "not found"),
// budgets and rate limits. Inputs are checked here for shape (zod); Berth checks the rest and its refusal
// comes back as a tool error with Berth's text (results.ts).
import { setTimeout as sleep } from 'node:timers/promises';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { z } from 'zod';
import type { Berth, RunRequest, SpawnRequest } from '@berth/client';
import { readAgentOutput } from './agent-output.js';
import { contentBytes, fileContent, readAtMost, toolResult } from './results.js';

/** What the server tells a client about itself. */
export interface McpServerInfo {
  readonly version: string;
}

/** The tools' names, in the order tools/list gives them. */
export const BERTH_TOOL_NAMES = [
  'run_prompt',
  'start_job',
  'get_job',
  'spawn_agent',
  'send_to_agent',
  'read_agent_output',
  'list_sessions',
  'read_session_messages',
  'list_workspaces',
  'list_workspace_files',
  'push_file',
  'pull_file',
] as const;

const INSTRUCTIONS =
  'Berth runs Claude Code in isolated containers. run_prompt runs a prompt and answers when it has ended; ' +
  'start_job queues one and get_job follows it. Persistent agents keep one engine for many turns: spawn_agent, ' +
  'send_to_agent, then read_agent_output (pass its last_event_id back to read the next turn). Sessions keep ' +
  'conversations (continue one with session_id). Workspaces are file trees a run works in: push_file creates ' +
  'one when no workspace_id is given; pass it as workspace to run_prompt.';

/** Files read back whole up to this size; larger ones are cut (truncated: true). */
const DEFAULT_PULL_BYTES = 256 * 1024;
const MAX_PULL_BYTES = 4 * 1024 * 1024;
/** How long send_to_agent waits for a starting agent: Berth gives a new engine 2 minutes to become ready. */
const AGENT_READY_WAIT_MS = 120_000;

const Id = (what: string) => z.string().min(1).max(200).describe(what);
const prompt = z.string().min(1).max(1_000_000).describe('The prompt given to the engine.');
const runOptions = {
  session_id: z.string().uuid().optional().describe('Continue this session (its conversation, and its workspace if it has one).'),
  workspace: z.string().uuid().optional().describe('A workspace id (push_file, list_workspaces): mounted read-write at the workdir.'),
  model: z.string().min(1).max(200).optional().describe('Model name or alias (sonnet, opus, haiku).'),
};
const waitSeconds = (what: string, byDefault: number) =>
  z.number().int().min(0).max(600).default(byDefault).describe(`${what} (seconds, at most 600; default ${byDefault}).`);

/** A run request from a tool's arguments (the engine options Berth names; everything else its defaults). */
function runRequest(args: { prompt: string; session_id?: string | undefined; workspace?: string | undefined; model?: string | undefined; timeout?: string | undefined }): RunRequest {
  const engine = {
    ...(args.session_id === undefined ? {} : { session_id: args.session_id, resume: true }),
    ...(args.model === undefined ? {} : { model: args.model }),
  };
  return {
    prompt: args.prompt,
    ...(args.workspace === undefined ? {} : { workspace: args.workspace }),
    ...(Object.keys(engine).length === 0 ? {} : { engine }),
    ...(args.timeout === undefined ? {} : { container: { timeout: args.timeout } }),
  };
}

/** An MCP server offering Berth's tools, every one acting through `berth` (and so as its caller). */
export function berthMcpServer(berth: Berth, info: McpServerInfo): McpServer {
  const server = new McpServer({ name: 'berth', title: 'Berth', version: info.version }, { instructions: INSTRUCTIONS });
  registerBerthTools(server, berth);
  return server;
}

export function registerBerthTools(server: McpServer, berth: Berth): void {
  server.registerTool(
    'run_prompt',
    {
      title: 'Run a prompt',
      description: 'Runs a prompt in a fresh container and answers when it has ended: the output and the session_id (pass it back as session_id to continue the conversation).',
      inputSchema: { prompt, ...runOptions, timeout: z.string().max(20).optional().describe('Maximum run time, e.g. 5m (default 30m).') },
    },
    (args, { signal }) =>
      toolResult(async () => {
        const run = await berth.run(runRequest(args), { signal });
        return { run_id: run.id, session_id: run.session_id, output: run.output, ...(run.structured_output === undefined ? {} : { structured_output: run.structured_output }) };
      }),
  );

  server.registerTool(
    'start_job',
    {
      title: 'Start a prompt as a job',
      description: 'Queues a prompt as an asynchronous job and answers at once with its job_id; follow it with get_job.',
      inputSchema: { prompt, ...runOptions, timeout: z.string().max(20).optional().describe('Maximum run time, e.g. 5m (default 30m).') },
    },
    (args, { signal }) =>
      toolResult(async () => {
        const job = await berth.runAsync(runRequest(args), { signal });
        return { job_id: job.job_id, session_id: job.session_id };
      }),
  );

  server.registerTool(
    'get_job',
    {
      title: 'A job\'s status and result',
      description: 'A job\'s status (pending, running, completed, failed, crashed, cancelled) and, once it has ended, its output or error. With wait_seconds, waits up to that long for it to end.',
      inputSchema: { job_id: Id('The job id (job-…).'), wait_seconds: waitSeconds('How long to wait for the job to end', 0) },
    },
    ({ job_id, wait_seconds }, { signal }) =>
      toolResult(async () => {
        let job = await berth.jobs.get(job_id, { signal });
        if (wait_seconds > 0) job = await berth.waitForJob(job_id, { timeout: wait_seconds * 1000, signal }).catch(async (error: unknown) => {
          if (error instanceof DOMException && error.name === 'TimeoutError') return berth.jobs.get(job_id, { signal });
          throw error;
        });
        return { job_id: job.id, session_id: job.session_id, status: job.status, output: job.output, ...(job.error ? { error: job.error } : {}), ...(job.crash_info ? { crash_info: job.crash_info } : {}) };
      }),
  );

  server.registerTool(
    'spawn_agent',
    {
      title: 'Spawn a persistent agent',
      description: 'Starts a persistent agent (one engine kept running for many turns) and answers at once with its agent_id; it is ready when its status is idle. A first prompt starts its first turn.',
      inputSchema: { prompt: prompt.optional(), ...runOptions },
    },
    (args, { signal }) =>
      toolResult(async () => {
        const request: SpawnRequest = {
          ...(args.prompt === undefined ? {} : { prompt: args.prompt }),
          ...(args.workspace === undefined ? {} : { workspace: args.workspace }),
          ...(args.session_id === undefined && args.model === undefined
            ? {}
            : { engine: { ...(args.session_id === undefined ? {} : { session_id: args.session_id, resume: true }), ...(args.model === undefined ? {} : { model: args.model }) } }),
        };
        const agent = await berth.agents.spawn(request, { signal });
        return { agent_id: agent.id, status: agent.status };
      }),
  );

  server.registerTool(
    'send_to_agent',
    {
      title: 'Send a prompt to an agent',
      description: 'Starts the agent\'s next turn with this prompt (waiting first while the agent is still starting) and answers its turn_id; read what it says with read_agent_output.',
      inputSchema: { agent_id: Id('The agent id (agent-…).'), prompt },
    },
    ({ agent_id, prompt: text }, { signal }) =>
      toolResult(async () => {
        await untilStarted(berth, agent_id, signal);
        const turn = await berth.agents.send(agent_id, text, { signal });
        return { agent_id, turn_id: turn.turn_id };
      }),
  );

  server.registerTool(
    'read_agent_output',
    {
      title: 'Read an agent\'s output',
      description:
        'Reads the agent\'s events after after_event_id (0: from the oldest kept) up to the end of the next turn, the agent\'s exit, or wait_seconds: per turn the assistant\'s text and its result. Pass last_event_id back as after_event_id to read the following turn.',
      inputSchema: {
        agent_id: Id('The agent id (agent-…).'),
        after_event_id: z.number().int().min(0).default(0).describe('The last_event_id of the previous read; 0 reads from the oldest event kept.'),
        wait_seconds: waitSeconds('How long to wait for a turn to end', 60),
      },
    },
    ({ agent_id, after_event_id, wait_seconds }, { signal }) =>
      toolResult(async () => ({ agent_id, ...(await readAgentOutput(berth, agent_id, { after: after_event_id, waitMs: wait_seconds * 1000, signal })) })),
  );

  server.registerTool(
    'list_sessions',
    { title: 'List sessions', description: 'The caller\'s sessions, most recently active first: id, title, workdir, message count, times.' },
    ({ signal }) => toolResult(async () => ({ ...(await berth.sessions.list({ signal })) })),
  );

  server.registerTool(
    'read_session_messages',
    {
      title: 'Read a session\'s messages',
      description: 'One page of a session\'s messages in conversation order (tool calls and results as text).',
      inputSchema: {
        session_id: z.string().uuid().describe('The session id.'),
        offset: z.number().int().min(0).default(0).describe('Messages skipped (default 0).'),
        limit: z.number().int().min(1).max(500).default(50).describe('Page size (default 50).'),
      },
    },
    ({ session_id, offset, limit }, { signal }) => toolResult(async () => ({ session_id, ...(await berth.sessions.messages(session_id, { offset, limit }, { signal })) })),
  );

  server.registerTool(
    'list_workspaces',
    { title: 'List workspaces', description: 'The caller\'s workspaces: id, size, file count, the sessions using them.' },
    ({ signal }) => toolResult(async () => ({ ...(await berth.workspaces.list({ signal })) })),
  );

  server.registerTool(
    'list_workspace_files',
    {
      title: 'List a workspace directory',
      description: 'The entries of a directory of a workspace (name, type, size, mode, mtime); path "" is its root.',
      inputSchema: { workspace_id: z.string().uuid().describe('The workspace id.'), path: z.string().max(4096).default('').describe('A directory, relative to the root.') },
    },
    ({ workspace_id, path }, { signal }) => toolResult(async () => ({ workspace_id, ...(await berth.workspaces.files(workspace_id, path, { signal })) })),
  );

  server.registerTool(
    'push_file',
    {
      title: 'Write a file into a workspace',
      description: 'Writes a file (UTF-8 text, or base64 with encoding base64) at path in a workspace, creating parent directories; without workspace_id a new workspace is created first. Answers the workspace_id.',
      inputSchema: {
        workspace_id: z.string().uuid().optional().describe('The workspace; a new one when absent.'),
        path: z.string().min(1).max(4096).describe('The file\'s path, relative to the workspace root.'),
        content: z.string().max(16 * 1024 * 1024).describe('The file\'s content.'),
        encoding: z.enum(['utf8', 'base64']).default('utf8').describe('How content is written: utf8 (default) or base64.'),
      },
    },
    ({ workspace_id, path, content, encoding }, { signal }) =>
      toolResult(async () => {
        const id = workspace_id ?? (await berth.workspaces.create({}, { signal })).id;
        const uploaded = await berth.workspaces.upload(id, path, contentBytes(content, encoding), { signal });
        return { workspace_id: id, created_workspace: workspace_id === undefined, ...uploaded };
      }),
  );

  server.registerTool(
    'pull_file',
    {
      title: 'Read a file of a workspace',
      description: 'Reads a file of a workspace: UTF-8 text as it is, other bytes as base64 (encoding says which). Files larger than max_bytes are cut (truncated: true).',
      inputSchema: {
        workspace_id: z.string().uuid().describe('The workspace id.'),
        path: z.string().min(1).max(4096).describe('The file\'s path, relative to the workspace root.'),
        max_bytes: z.number().int().min(1).max(MAX_PULL_BYTES).default(DEFAULT_PULL_BYTES).describe(`Bytes read at most (default ${DEFAULT_PULL_BYTES}).`),
      },
    },
    ({ workspace_id, path, max_bytes }, { signal }) =>
      toolResult(async () => {
        const { bytes, truncated } = await readAtMost(await berth.workspaces.download(workspace_id, path, { signal }), max_bytes);
        return { workspace_id, path, bytes: bytes.byteLength, truncated, ...fileContent(bytes) };
      }),
  );
}

/** Waits while the agent is starting (a send would be refused with 503 until it is idle). */
async function untilStarted(berth: Berth, agentId: string, signal: AbortSignal): Promise<void> {
  const deadline = Date.now() + AGENT_READY_WAIT_MS;
  while ((await berth.agents.get(agentId, { signal })).status === 'starting' && Date.now() < deadline) {
    await sleep(250, undefined, { signal });
  }
}

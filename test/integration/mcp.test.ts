// Berth as an MCP server (issue 27), driven by the official SDK's Client against a real Berth on real
// Podman with authentication on and two callers:
//  - over streamable HTTP at /mcp: the tool list, a prompt run (sync, and as a job), an agent spawned, sent
//    to and read, a session's messages, files pushed into a workspace, run on and pulled back, Berth's
//    refusals as tool errors with Berth's text;
//  - /mcp behind the API's authentication: no token or a bad one is refused with the API's 401 body;
//  - the attack: caller 2's token reaches none of caller 1's session, job, agent or workspace through any
//    tool (each answers Berth's "not found"), sees none of them listed, and caller 1's agent takes no turn;
//  - over stdio: `berth mcp` spawned, logged in with `berth login`, lists the tools and runs a prompt.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { BERTH_TOOL_NAMES } from '@berth/mcp';
import { startBerthWithCallers } from '../support/callers.js';
import { containersOf, type TestBerth } from '../support/berth.js';
import { waitFor } from '../support/wait.js';

const BERTH = join(resolve(import.meta.dirname, '../..'), 'node_modules/.bin/berth');

/** An SDK client connected to the test Berth's /mcp with these headers. */
async function httpClient(url: string, headers: Record<string, string>): Promise<Client> {
  const client = new Client({ name: 'mcp-test', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp`), { requestInit: { headers } }));
  return client;
}

/** A tool's structured answer; fails the test when the tool answered an error. */
async function call(client: Client, name: string, args: Record<string, unknown> = {}): Promise<any> {
  const result = (await client.callTool({ name, arguments: args }, undefined, { timeout: 120_000 })) as CallToolResult;
  assert.notEqual(result.isError, true, `${name}: ${JSON.stringify(result.content)}`);
  return result.structuredContent;
}

/** A tool's error text; fails the test when the tool did not answer an error. */
async function refusal(client: Client, name: string, args: Record<string, unknown>): Promise<string> {
  const result = (await client.callTool({ name, arguments: args }, undefined, { timeout: 60_000 })) as CallToolResult;
  assert.equal(result.isError, true, `${name} answered ${JSON.stringify(result.structuredContent)}`);
  const [first] = result.content;
  assert.equal(first?.type, 'text');
  return (first as { text: string }).text;
}

describe('Berth as an MCP server', { timeout: 180_000 }, () => {
  let t: TestBerth;
  let as: (name: 'alice' | 'mallory') => Record<string, string>;
  let apiTokenOf: (name: 'alice' | 'mallory') => string;
  let alice: Client;
  let mallory: Client;
  /** What alice made through MCP, for the attack. */
  const own = { session: '', job: '', agent: '', workspace: '' };

  before(async () => {
    ({ t, as, apiTokenOf } = await startBerthWithCallers(['alice', 'mallory'], { SERVICE_POOL_SIZE: '0', SERVICE_AGENT_POOL_SIZE: '0' }));
    alice = await httpClient(t.url, as('alice'));
    mallory = await httpClient(t.url, as('mallory'));
  });

  /** Set by the last test, which stops Berth with a tool call in flight. */
  let stopped = false;

  after(async () => {
    await alice?.close();
    await mallory?.close();
    if (t && !stopped) await t.stop();
  });

  it('lists every Berth tool with its input schema', async () => {
    const { tools } = await alice.listTools();
    assert.deepEqual(tools.map((tool) => tool.name), [...BERTH_TOOL_NAMES]);
    const runPrompt = tools.find((tool) => tool.name === 'run_prompt')!;
    assert.deepEqual(runPrompt.inputSchema.required, ['prompt']);
  });

  it('runs a prompt and reads its session back', async () => {
    const run = await call(alice, 'run_prompt', { prompt: 'say: hello from mcp' });
    assert.equal(run.output, 'hello from mcp');
    own.session = run.session_id;
    const { messages } = await call(alice, 'read_session_messages', { session_id: own.session });
    assert.deepEqual(messages.map((m: { role: string; content: string }) => [m.role, m.content.trim()]), [['user', 'say: hello from mcp'], ['assistant', 'hello from mcp']]);
    const { sessions } = await call(alice, 'list_sessions');
    assert.ok(sessions.some((s: { id: string }) => s.id === own.session));
    const resumed = await call(alice, 'run_prompt', { prompt: 'recall:', session_id: own.session });
    assert.equal(resumed.output, 'say: hello from mcp');
  });

  it('starts a job and follows it to its result', async () => {
    const { job_id } = await call(alice, 'start_job', { prompt: 'say: later' });
    own.job = job_id;
    const job = await call(alice, 'get_job', { job_id, wait_seconds: 60 });
    assert.equal(job.status, 'completed');
    assert.equal(job.output, 'later');
  });

  it('spawns an agent, sends to it and reads its turn', async () => {
    const { agent_id } = await call(alice, 'spawn_agent', {});
    own.agent = agent_id;
    const { turn_id } = await call(alice, 'send_to_agent', { agent_id, prompt: 'say: agent here' });
    const read = await call(alice, 'read_agent_output', { agent_id, wait_seconds: 60 });
    assert.equal(read.state, 'turn_ended');
    assert.deepEqual(read.turns.map((turn: { turn_id: string; result: string }) => [turn.turn_id, turn.result]), [[turn_id, 'agent here']]);
    await call(alice, 'send_to_agent', { agent_id, prompt: 'say: second' });
    const next = await call(alice, 'read_agent_output', { agent_id, after_event_id: read.last_event_id, wait_seconds: 60 });
    assert.deepEqual(next.turns.map((turn: { result: string }) => turn.result), ['second']);
  });

  it('pushes a file into a new workspace, runs on it and pulls what the run wrote', async () => {
    const pushed = await call(alice, 'push_file', { path: 'notes/todo.txt', content: 'fix calc\n' });
    assert.equal(pushed.created_workspace, true);
    own.workspace = pushed.workspace_id;
    const run = await call(alice, 'run_prompt', { prompt: 'run: cat notes/todo.txt && printf "\\x00\\x01" > out.bin', workspace: own.workspace });
    assert.equal(run.output.trim(), 'fix calc');
    assert.deepEqual(await call(alice, 'pull_file', { workspace_id: own.workspace, path: 'notes/todo.txt' }), {
      workspace_id: own.workspace, path: 'notes/todo.txt', bytes: 9, truncated: false, encoding: 'utf8', content: 'fix calc\n',
    });
    const binary = await call(alice, 'pull_file', { workspace_id: own.workspace, path: 'out.bin' });
    assert.deepEqual([binary.encoding, binary.content], ['base64', Buffer.from([0, 1]).toString('base64')]);
    const { entries } = await call(alice, 'list_workspace_files', { workspace_id: own.workspace });
    assert.deepEqual(entries.map((entry: { name: string }) => entry.name).sort(), ['notes', 'out.bin']);
  });

  it('a tool call the client cancels stops its run: its container goes', async () => {
    const runs = async () => (await containersOf(t.config.instanceName)).filter((c) => c.name.startsWith('berth-run-'));
    const cancel = new AbortController();
    const pending = alice.callTool({ name: 'run_prompt', arguments: { prompt: 'run: /bin/sleep 60' } }, undefined, { signal: cancel.signal, timeout: 120_000 });
    await waitFor('the run container', async () => ((await runs()).some((c) => c.state === 'running') ? true : undefined), 60_000, 200);
    cancel.abort();
    await assert.rejects(pending);
    // The cancellation arrives in a POST of its own; it reaches the call it names, whose run Berth stops.
    await waitFor('the run container to go', async () => ((await runs()).length === 0 ? true : undefined), 30_000, 200);
  });

  it("answers Berth's refusals as tool errors with Berth's text", async () => {
    assert.equal(await refusal(alice, 'read_session_messages', { session_id: '3f0c2a9e-6a1b-4c1d-9f7e-2b8d4c6a1e55' }), 'session 3f0c2a9e-6a1b-4c1d-9f7e-2b8d4c6a1e55 not found');
    assert.match(await refusal(alice, 'run_prompt', { prompt: 'say: x', timeout: 'forever' }), /timeout/);
    // The SDK's schema check comes first: a wrong type never reaches Berth.
    assert.match(await refusal(alice, 'get_job', { job_id: 5 }), /Input validation error/);
  });

  it('refuses /mcp without a valid token with the API\'s 401 body, and GET /mcp with 405', async () => {
    const initialize = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'x', version: '1' } } };
    const headers = { accept: 'application/json, text/event-stream' };
    const none = await t.request('POST', '/mcp', initialize, headers);
    assert.equal(none.status, 401);
    assert.deepEqual(none.body, { error: 'token required', status: 'error' });
    const forged = await t.request('POST', '/mcp', initialize, { ...headers, authorization: 'Bearer not-a-token' });
    assert.equal(forged.status, 401);
    assert.deepEqual(forged.body, { error: 'invalid token', status: 'error' });
    // The API token itself is not an access token either.
    const apiToken = await t.request('POST', '/mcp', initialize, { ...headers, authorization: `Bearer ${apiTokenOf('alice')}` });
    assert.equal(apiToken.status, 401);
    const get = await t.request('GET', '/mcp', undefined, { ...headers, ...as('alice') });
    assert.equal(get.status, 405);
    assert.equal(get.headers.get('allow'), 'POST');
    assert.equal(get.body.status, 'error');
  });

  it("attack: caller 2's token reaches nothing of caller 1 through the tools", async () => {
    assert.ok(own.session && own.job && own.agent && own.workspace, 'the earlier tests made caller 1\'s work');
    const notFound = /not found/;
    assert.match(await refusal(mallory, 'read_session_messages', { session_id: own.session }), notFound);
    assert.match(await refusal(mallory, 'run_prompt', { prompt: 'recall:', session_id: own.session }), notFound);
    assert.match(await refusal(mallory, 'get_job', { job_id: own.job }), notFound);
    assert.match(await refusal(mallory, 'send_to_agent', { agent_id: own.agent, prompt: 'say: hijacked' }), notFound);
    assert.match(await refusal(mallory, 'read_agent_output', { agent_id: own.agent, wait_seconds: 1 }), notFound);
    assert.match(await refusal(mallory, 'pull_file', { workspace_id: own.workspace, path: 'notes/todo.txt' }), notFound);
    assert.match(await refusal(mallory, 'list_workspace_files', { workspace_id: own.workspace }), notFound);
    assert.match(await refusal(mallory, 'push_file', { workspace_id: own.workspace, path: 'planted.txt', content: 'x' }), notFound);
    assert.match(await refusal(mallory, 'run_prompt', { prompt: 'run: ls', workspace: own.workspace }), notFound);
    const { sessions } = await call(mallory, 'list_sessions');
    assert.deepEqual(sessions.filter((s: { id: string }) => s.id === own.session), []);
    const { workspaces } = await call(mallory, 'list_workspaces');
    assert.deepEqual(workspaces.filter((w: { id: string }) => w.id === own.workspace), []);
    // Nothing happened to caller 1's work: the agent took no turn, the workspace got no file.
    const agent = await t.request('GET', `/agents/${own.agent}`, undefined, as('alice'));
    assert.equal(agent.body.status, 'idle');
    const planted = await t.request('GET', `/workspaces/${own.workspace}/files/planted.txt`, undefined, as('alice'));
    assert.equal(planted.status, 404);
    const messages = await call(alice, 'read_session_messages', { session_id: own.session });
    assert.equal(messages.total, 4);
  });

  it('serves the same tools over stdio: `berth mcp` with the login of `berth login`', async () => {
    const config = await mkdtemp(join(tmpdir(), 'berth-mcp-cli-'));
    try {
      const env = { ...process.env, BERTH_URL: t.url, BERTH_CONFIG_DIR: config } as Record<string, string>;
      await new Promise<void>((done, fail) => {
        const login = spawn(BERTH, ['login'], { env, stdio: ['pipe', 'ignore', 'inherit'] });
        login.on('error', fail);
        login.on('close', (code) => (code === 0 ? done() : fail(new Error(`berth login exited with ${code}`))));
        login.stdin.end(`${apiTokenOf('alice')}\n`);
      });
      const client = new Client({ name: 'mcp-test-stdio', version: '1.0.0' });
      await client.connect(new StdioClientTransport({ command: BERTH, args: ['mcp'], env, stderr: 'inherit' }));
      try {
        const { tools } = await client.listTools();
        assert.deepEqual(tools.map((tool) => tool.name), [...BERTH_TOOL_NAMES]);
        const run = await call(client, 'run_prompt', { prompt: 'say: over stdio' });
        assert.equal(run.output, 'over stdio');
        // The CLI's login is alice's: her session is hers through stdio too.
        const { messages } = await call(client, 'read_session_messages', { session_id: own.session });
        assert.equal(messages[0].content.trim(), 'say: hello from mcp');
      } finally {
        await client.close();
      }
    } finally {
      await rm(config, { recursive: true, force: true });
    }
  });

  it('a stop with a tool call in flight ends the call and leaves nothing', async () => {
    if (own.agent !== '') assert.equal((await t.request('DELETE', `/agents/${own.agent}`, undefined, as('alice'))).status, 204);
    assert.deepEqual(await t.leftovers(), []);
    const runs = async () => (await containersOf(t.config.instanceName)).filter((c) => c.name.startsWith('berth-run-'));
    const pending = alice.callTool({ name: 'run_prompt', arguments: { prompt: 'run: /bin/sleep 60' } }, undefined, { timeout: 120_000 }).then(
      (result) => ({ answered: result as CallToolResult }),
      (error: unknown) => ({ failed: error }),
    );
    await waitFor('the run container', async () => ((await runs()).some((c) => c.state === 'running') ? true : undefined), 60_000, 200);
    const started = Date.now();
    stopped = true;
    // t.stop() fails when any container, network or nft table of the instance is left.
    await t.stop();
    const ended = await pending;
    assert.ok(Date.now() - started < 30_000, `the stop took ${Date.now() - started} ms`);
    if ('answered' in ended) assert.equal(ended.answered.isError, true, JSON.stringify(ended.answered));
  });
});

// Berth as an MCP server, end to end by the engine itself (issue 27): a Berth run whose engine has Berth
// configured as an MCP server calls one of Berth's tools, and the tool's effect is checked through the API.
//
// How the engine is configured: the way a user configures Claude Code for a project, in the run's
// workspace: `.mcp.json` names Berth's /mcp (streamable HTTP) with the caller's access token, and
// `.claude/settings.json` approves the project's MCP servers (a headless engine has no one to ask).
//
// How the container reaches Berth: an engine container has no route out; its only way out is Berth's egress
// proxy (HTTP_PROXY), which admits the hosts the run allows and refuses internal addresses, Berth's own
// included. So the engine reaches Berth's API the way it reaches any outside host: by a public name the run
// allows (`container.network.allow`). Here `berth.test` stands for that name: the test Berth's resolver
// override (the one the egress tests use for their outside hosts) maps it to the API listener on 127.0.0.1.
//
// The offline model answers `mcp: <tool> <json>` as a model would: it fetches the deferred MCP tool with
// ToolSearch, calls it, and answers with its result.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startBerthWithCallers } from '../support/callers.js';
import type { TestBerth } from '../support/berth.js';

const BERTH_HOST = 'berth.test';

describe('an engine calling Berth as its MCP server', { timeout: 150_000 }, () => {
  let t: TestBerth;
  let as: (name: 'alice') => Record<string, string>;
  let port: string;

  before(async () => {
    ({ t, as } = await startBerthWithCallers(['alice'], { SERVICE_POOL_SIZE: '0', SERVICE_AGENT_POOL_SIZE: '0' }, { egressHosts: new Map([[BERTH_HOST, '127.0.0.1']]) }));
    port = new URL(t.url).port;
  });

  after(async () => {
    if (t) {
      assert.deepEqual(await t.leftovers(), []);
      await t.stop();
    }
  });

  async function workspace(): Promise<string> {
    const created = await t.request('POST', '/workspaces', {}, as('alice'));
    assert.equal(created.status, 201, JSON.stringify(created.body));
    return created.body.id;
  }

  async function put(id: string, path: string, content: string): Promise<void> {
    const response = await fetch(`${t.url}/workspaces/${id}/files/${path}`, { method: 'PUT', headers: { ...as('alice'), 'content-type': 'application/octet-stream' }, body: content });
    assert.equal(response.status, 201, await response.text());
  }

  it("calls a Berth tool from inside a run: the file it pushes lands in the caller's other workspace", async () => {
    const project = await workspace();
    const target = await workspace();
    const mcpConfig = { mcpServers: { berth: { type: 'http', url: `http://${BERTH_HOST}:${port}/mcp`, headers: as('alice') } } };
    await put(project, '.mcp.json', JSON.stringify(mcpConfig));
    await put(project, '.claude/settings.json', JSON.stringify({ enableAllProjectMcpServers: true }));

    const call = { workspace_id: target, path: 'from-engine.txt', content: 'written by the engine through MCP' };
    const run = await t.request(
      'POST',
      '/run',
      { prompt: `mcp: mcp__berth__push_file ${JSON.stringify(call)}`, workspace: project, container: { network: { allow: [`${BERTH_HOST}:${port}`] } } },
      as('alice'),
    );
    assert.equal(run.status, 200, JSON.stringify(run.body));
    const answered = JSON.parse(run.body.output);
    assert.deepEqual([answered.workspace_id, answered.path, answered.created_workspace], [target, 'from-engine.txt', false]);

    const file = await fetch(`${t.url}/workspaces/${target}/files/from-engine.txt`, { headers: as('alice') });
    assert.equal(file.status, 200);
    assert.equal(await file.text(), 'written by the engine through MCP');
    // The engine's MCP connection went out through the run's egress proxy, as an allowed host.
    const usage = await t.request('GET', `/usage/runs/${run.body.id}`, undefined, as('alice'));
    const decisions = usage.body.egress.map((d: { host: string; decision: string }) => `${d.host} ${d.decision}`);
    assert.ok(decisions.includes(`${BERTH_HOST} allowed`), decisions.join(', '));
  });

  it('reaches no Berth from a run that does not allow its host: the proxy refuses it, the engine has no Berth tools', async () => {
    const project = await workspace();
    const target = await workspace();
    const mcpConfig = { mcpServers: { berth: { type: 'http', url: `http://${BERTH_HOST}:${port}/mcp`, headers: as('alice') } } };
    await put(project, '.mcp.json', JSON.stringify(mcpConfig));
    await put(project, '.claude/settings.json', JSON.stringify({ enableAllProjectMcpServers: true }));
    const call = { workspace_id: target, path: 'from-engine.txt', content: 'x' };
    const run = await t.request('POST', '/run', { prompt: `mcp: mcp__berth__push_file ${JSON.stringify(call)}`, workspace: project }, as('alice'));
    assert.equal(run.status, 200, JSON.stringify(run.body));
    assert.match(run.body.output, /No such tool available: mcp__berth__push_file/);
    const usage = await t.request('GET', `/usage/runs/${run.body.id}`, undefined, as('alice'));
    const decisions = usage.body.egress.map((d: { host: string; decision: string }) => `${d.host} ${d.decision}`);
    assert.ok(decisions.includes(`${BERTH_HOST} refused_host`), decisions.join(', '));
    const file = await fetch(`${t.url}/workspaces/${target}/files/from-engine.txt`, { headers: as('alice') });
    assert.equal(file.status, 404);
  });
});

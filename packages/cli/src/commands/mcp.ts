// berth mcp: Berth's tools (@berth/mcp, packages/mcp) for an MCP client that starts this command and speaks
// MCP on its stdin and stdout, e.g. `claude mcp add berth -- berth mcp`. It acts as the CLI does: against
// --url, with the tokens `berth login` stored for that server. stdout carries MCP messages only; nothing else
// is printed there. It serves until its input ends (the client left) or it is signalled; a tool call still running then
// is aborted, and so is its request to Berth (a run whose client left is stopped by Berth).
import { once } from 'node:events';
import { Command } from 'commander';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { berthMcpServer } from '@berth/mcp';
import { cliVersion, type ContextOf } from '../context.js';

export function mcpCommand(contextOf: ContextOf): Command {
  return new Command('mcp')
    .description("serve Berth's tools to an MCP client over stdin and stdout (run prompts, agents, sessions, workspace files)")
    .action(async (_options: unknown, command: Command) => {
      const { berth } = contextOf(command);
      const server = berthMcpServer(berth, { version: cliVersion() });
      const left = new AbortController();
      const leave = () => left.abort();
      process.stdin.once('end', leave);
      process.stdin.once('close', leave);
      process.once('SIGINT', leave);
      process.once('SIGTERM', leave);
      await server.connect(new StdioServerTransport());
      if (!process.stdin.readableEnded) await once(left.signal, 'abort');
      await server.close();
    });
}

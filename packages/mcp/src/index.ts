// @berth/mcp: Berth's tools for MCP clients (Model Context Protocol), one list for both ways Berth is served
// over MCP: `berth mcp` (@berth/cli, stdio) and Berth's own POST /mcp (streamable HTTP). A package of its own
// so that the server and the CLI share the list without the server depending on its command line. Each tool
// is a call of @berth/client; the caller picks the transport and the Berth the tools act on.
export { BERTH_TOOL_NAMES, berthMcpServer, registerBerthTools, type McpServerInfo } from './tools.js';

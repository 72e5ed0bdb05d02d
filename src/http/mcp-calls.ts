// The tool calls /mcp is answering, so that a client's `notifications/cancelled` reaches the call it names.
// /mcp is stateless: the cancellation comes in a POST of its own, to a server that never saw the call. A
// call is found by the JSON-RPC id the client gave it and the Authorization header both came with, so one
// caller can never cancel another's call; two calls of the same caller under the same id (two clients of one
// token) are ambiguous, and neither is cancelled. Cancelling closes the call's server, which aborts the tool
// and so its request to Berth, as a client that left: a run is stopped.
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';

/** The parts of a JSON-RPC message this looks at. */
interface JsonRpcMessage {
  readonly method?: unknown;
  readonly id?: unknown;
  readonly params?: { readonly requestId?: unknown };
}

function isCallId(value: unknown): value is string | number {
  return typeof value === 'string' || typeof value === 'number';
}

export class McpCalls {
  private readonly calls = new Map<string, Set<McpServer>>();

  /** Records `server` as answering the message's tools/call until `release` is called; other messages are not kept. */
  track(authorization: string | undefined, message: unknown, server: McpServer): () => void {
    const { method, id } = (message ?? {}) as JsonRpcMessage;
    if (method !== 'tools/call' || !isCallId(id)) return () => undefined;
    const key = keyOf(authorization, id);
    const servers = this.calls.get(key) ?? new Set();
    servers.add(server);
    this.calls.set(key, servers);
    return () => {
      servers.delete(server);
      if (servers.size === 0 && this.calls.get(key) === servers) this.calls.delete(key);
    };
  }

  /** For a notifications/cancelled: closes the one call it names, if there is exactly one. */
  async cancel(authorization: string | undefined, message: unknown): Promise<void> {
    const { method, params } = (message ?? {}) as JsonRpcMessage;
    if (method !== 'notifications/cancelled' || !isCallId(params?.requestId)) return;
    const servers = this.calls.get(keyOf(authorization, params.requestId));
    if (servers?.size !== 1) return;
    const [server] = servers;
    await server!.close().catch(() => undefined);
  }
}

function keyOf(authorization: string | undefined, id: string | number): string {
  return JSON.stringify([authorization ?? null, id]);
}

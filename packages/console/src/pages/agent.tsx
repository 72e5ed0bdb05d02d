// One agent: its snapshot, and a live chat. The agent's events arrive over SSE (the SDK's
// agents.events(), which reconnects); a send answers at once with a turn id and the turn's output follows
// on the stream. Events are not replayed, so turns from before the page was opened are not shown.
import type { Agent } from '@berth/client';
import { isAbortError } from '@berth/client';
import { useEffect, useRef, useState } from 'preact/hooks';
import { applyEvent, EMPTY_CHAT, notSent, sending, sent, type Chat, type ChatItem } from '../agents/chat.js';
import { useBerth } from '../berth-context.js';
import { describeError, ErrorMessage } from '../components/error-message.js';
import { Page } from '../components/page.js';
import { StatusBadge } from '../components/status-badge.js';
import { Time } from '../components/time.js';
import { useResource } from '../hooks/use-resource.js';
import { Link, navigate } from '../router.js';

const REFRESH_MS = 2000;

export function AgentPage({ id }: { id: string }) {
  const berth = useBerth();
  const snapshot = useResource((signal) => berth.agents.get(id, { signal }), [berth, id], {
    refreshMs: REFRESH_MS,
    keepRefreshing: (agent) => agent.status !== 'exited',
  });
  const [chat, setChat] = useState<Chat>(EMPTY_CHAT);
  const [streamError, setStreamError] = useState<{ error: unknown; reconnecting: boolean }>();
  // Sends wait for the stream: Berth does not replay events, so a turn sent before it is open could be missed.
  const [connected, setConnected] = useState(false);
  const reloadSnapshot = useRef(snapshot.reload);
  reloadSnapshot.current = snapshot.reload;

  useEffect(() => {
    const controller = new AbortController();
    setChat(EMPTY_CHAT);
    void (async () => {
      try {
        const events = berth.agents.events(id, {
          signal: controller.signal,
          reconnect: true,
          onConnect: () => {
            setConnected(true);
            setStreamError(undefined);
          },
          onReconnect: (_attempt, reason) => {
            setConnected(false);
            setStreamError({ error: reason, reconnecting: true });
          },
        });
        for await (const event of events) {
          setChat((current) => applyEvent(current, event));
          // A turn began or ended, or the agent stopped: its status and counts changed.
          if (event.type !== 'output') reloadSnapshot.current();
        }
      } catch (error) {
        if (!isAbortError(error, controller.signal)) setStreamError({ error, reconnecting: false });
      }
      if (!controller.signal.aborted) setConnected(false);
    })();
    return () => controller.abort();
  }, [berth, id]);

  const [deleting, setDeleting] = useState(false);
  const [deleteError, setDeleteError] = useState<unknown>();
  const remove = async () => {
    setDeleting(true);
    setDeleteError(undefined);
    try {
      await berth.agents.delete(id);
      navigate('/agents');
    } catch (error) {
      setDeleteError(error);
      setDeleting(false);
    }
  };

  const agent = snapshot.value;
  return (
    <Page
      title={`Agent ${id}`}
      actions={
        <button type="button" class="danger" onClick={remove} disabled={deleting}>
          {deleting ? 'Deleting…' : agent?.status === 'exited' ? 'Forget agent' : 'Delete agent'}
        </button>
      }
    >
      <p>
        <Link href="/agents">← All agents</Link>
      </p>
      <ErrorMessage error={snapshot.error} context="The agent could not be read" />
      <ErrorMessage error={deleteError} context="The agent was not deleted" />
      {agent && <Snapshot agent={agent} />}
      <section class="card chat-card" aria-labelledby="chat-heading">
        <h2 id="chat-heading">Chat</h2>
        <ChatLog items={chat.items} />
        <ErrorMessage
          error={streamError?.error}
          context={streamError?.reconnecting ? 'The agent\'s event stream broke off (reconnecting)' : 'The agent\'s event stream failed'}
        />
        {chat.closed && <p class="help">The agent's event stream has ended.</p>}
        {agent && agent.status !== 'exited' && <MessageBox agentId={id} agent={agent} connected={connected} chat={chat} onChat={setChat} />}
      </section>
    </Page>
  );
}

function Snapshot({ agent }: { agent: Agent }) {
  return (
    <section class="card" aria-labelledby="snapshot-heading">
      <h2 id="snapshot-heading">Snapshot</h2>
      <p role="status" class="agent-status">
        Status: <StatusBadge status={agent.status} />
      </p>
      <dl class="facts">
        <dt>Turns completed</dt>
        <dd>{agent.turns_completed}</dd>
        <dt>Session</dt>
        <dd>
          <code>{agent.session_id}</code>
        </dd>
        <dt>Created</dt>
        <dd>
          <Time iso={agent.created_at} />
        </dd>
        <dt>Last activity</dt>
        <dd>
          <Time iso={agent.last_activity_at} />
        </dd>
        <dt>Idle timeout</dt>
        <dd>{agent.idle_timeout_disabled ? 'disabled' : `${agent.idle_timeout_seconds} s`}</dd>
        {agent.exit_error && (
          <>
            <dt>Exit</dt>
            <dd>{agent.exit_error}</dd>
          </>
        )}
      </dl>
    </section>
  );
}

function ChatLog({ items }: { items: readonly ChatItem[] }) {
  if (items.length === 0) return <p class="empty">No turns yet on this page. Send a message below.</p>;
  return (
    // New turns and the text streaming into them are read out as they arrive.
    <ol class="chat" aria-live="polite" aria-relevant="additions text" data-testid="chat-log">
      {items.map((item) =>
        item.kind === 'note' ? (
          <li key={item.key} class="note">
            {item.text}
          </li>
        ) : (
          <li key={item.key} class="turn" data-status={item.status}>
            {item.prompt !== undefined && (
              <div class="message message-user">
                <span class="role">You</span>
                <div class="content">{item.prompt}</div>
              </div>
            )}
            <div class="message message-assistant">
              <span class="role">Agent</span>
              <div class="content">{item.text || (item.status === 'sending' || item.status === 'running' ? '…' : '')}</div>
              {item.errors.map((error, i) => (
                <p key={i} class="error-text">
                  {error}
                </p>
              ))}
              <span class="visually-hidden">{item.status === 'done' ? 'Turn complete.' : item.status === 'failed' ? 'Turn failed.' : ''}</span>
            </div>
          </li>
        ),
      )}
    </ol>
  );
}

interface MessageBoxProps {
  readonly agentId: string;
  readonly agent: Agent;
  /** Whether the agent's event stream is open. */
  readonly connected: boolean;
  readonly chat: Chat;
  readonly onChat: (change: (chat: Chat) => Chat) => void;
}

function MessageBox({ agentId, agent, connected, chat, onChat }: MessageBoxProps) {
  const berth = useBerth();
  const [prompt, setPrompt] = useState('');
  const inTurn = chat.items.some((item) => item.kind === 'turn' && (item.status === 'sending' || item.status === 'running'));
  const ready = agent.status === 'idle' && connected && !inTurn;

  const send = async (event?: Event) => {
    event?.preventDefault();
    const text = prompt.trim();
    if (!ready || text === '') return;
    const key = `sent-${Date.now()}-${Math.random()}`;
    onChat((current) => sending(current, key, text));
    setPrompt('');
    try {
      const { turn_id } = await berth.agents.send(agentId, text);
      onChat((current) => sent(current, key, turn_id));
    } catch (error) {
      onChat((current) => notSent(current, key, describeError(error)));
    }
  };

  return (
    <form class="form message-box" onSubmit={send}>
      <label for="agent-message">Message</label>
      <textarea
        id="agent-message"
        name="prompt"
        rows={3}
        aria-describedby="agent-message-help"
        value={prompt}
        onInput={(e) => setPrompt(e.currentTarget.value)}
        onKeyDown={(e) => {
          if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) void send(e);
        }}
      />
      <p id="agent-message-help" class="help">
        {!connected
          ? 'Connecting to the agent\'s event stream…'
          : agent.status === 'starting'
          ? 'The agent is starting; you can send once it is idle.'
          : inTurn || agent.status === 'generating'
            ? 'The agent is answering; send again when its turn has ended.'
            : 'Ctrl+Enter sends.'}
      </p>
      <div class="actions">
        <button type="submit" class="primary" disabled={!ready || prompt.trim() === ''}>
          Send
        </button>
      </div>
    </form>
  );
}

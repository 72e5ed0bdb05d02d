// A session's workspace (its files) and its transcript in conversation order, read a page at a time
// ("Load more" reads the next).
import type { Message } from '@berth/client';
import { useEffect, useState } from 'preact/hooks';
import { useBerth } from '../berth-context.js';
import { ErrorMessage } from '../components/error-message.js';
import { Page } from '../components/page.js';
import { Link } from '../router.js';
import { SessionWorkspace } from '../workspaces/session-workspace.js';

const PAGE_SIZE = 20;

interface Transcript {
  readonly messages: readonly Message[];
  readonly total: number;
  readonly hasMore: boolean;
}

/** Tool results reach the engine as user messages; they read better under their own name. */
function speaker(message: Message): string {
  if (message.role === 'assistant') return 'Assistant';
  return /^\[tool (result|error)\]/.test(message.content) ? 'Tool' : 'You';
}

export function SessionPage({ id }: { id: string }) {
  const berth = useBerth();
  const [transcript, setTranscript] = useState<Transcript>();
  const [loading, setLoading] = useState(false);
  const [error, setError] = useState<unknown>();
  const [title, setTitle] = useState<string>();

  const loadFrom = async (offset: number, signal?: AbortSignal) => {
    setLoading(true);
    setError(undefined);
    try {
      const page = await berth.sessions.messages(id, { limit: PAGE_SIZE, offset }, { signal });
      setTranscript((previous) => ({
        messages: [...(offset === 0 ? [] : (previous?.messages ?? [])), ...page.messages],
        total: page.total,
        hasMore: page.has_more,
      }));
    } catch (failure) {
      if (!signal?.aborted) setError(failure);
    } finally {
      if (!signal?.aborted) setLoading(false);
    }
  };

  useEffect(() => {
    const controller = new AbortController();
    setTranscript(undefined);
    void loadFrom(0, controller.signal);
    // The title is in the session list only.
    berth.sessions
      .list({ signal: controller.signal })
      .then(({ sessions }) => setTitle(sessions.find((s) => s.id === id)?.title || undefined))
      .catch(() => undefined);
    return () => controller.abort();
  }, [berth, id]);

  const shown = transcript?.messages.length ?? 0;
  return (
    <Page title={title ? `Session: ${title}` : `Session ${id}`}>
      <p>
        <Link href="/sessions">← All sessions</Link>
      </p>
      <p class="help">
        <code>{id}</code>
        {transcript && ` · ${transcript.total} message${transcript.total === 1 ? '' : 's'}`}
      </p>
      <SessionWorkspace sessionId={id} />
      <h2>Transcript</h2>
      <ErrorMessage error={error} context="The transcript could not be read" />
      {transcript && transcript.total === 0 && <p class="empty">No messages in this session.</p>}
      {shown > 0 && (
        <ol class="transcript" aria-label="Transcript">
          {transcript!.messages.map((message) => (
            <li key={message.id} class={`message message-${message.role}`}>
              <span class="role">{speaker(message)}</span>
              <div class="content">{message.content}</div>
            </li>
          ))}
        </ol>
      )}
      <p class="help" aria-live="polite">
        {transcript && transcript.total > 0 && `Showing ${shown} of ${transcript.total}.`}
      </p>
      {transcript?.hasMore && (
        <button type="button" onClick={() => void loadFrom(shown)} disabled={loading}>
          {loading ? 'Loading…' : 'Load more'}
        </button>
      )}
    </Page>
  );
}

// Starts a run from a prompt: streamed into the page as the engine answers (GET /run/stream), or queued as
// an async job (POST /run/async) whose page then follows it.
import { useRef, useState } from 'preact/hooks';
import { isAbortError } from '@berth/client';
import { useBerth } from '../berth-context.js';
import { ErrorMessage } from '../components/error-message.js';
import { Link, navigate } from '../router.js';

type Mode = 'stream' | 'job';

interface StreamState {
  readonly text: string;
  readonly running: boolean;
  readonly sessionId?: string;
  readonly runId?: string;
  readonly error?: unknown;
}

export function RunForm() {
  const berth = useBerth();
  const [prompt, setPrompt] = useState('');
  const [workdir, setWorkdir] = useState('');
  const [mode, setMode] = useState<Mode>('stream');
  const [error, setError] = useState<unknown>();
  const [busy, setBusy] = useState(false);
  const [stream, setStream] = useState<StreamState>();
  const abort = useRef<AbortController>();

  const submit = async (event: Event) => {
    event.preventDefault();
    setError(undefined);
    const request = { prompt, ...(workdir.trim() ? { workdir: workdir.trim() } : {}) };
    if (mode === 'job') {
      setBusy(true);
      try {
        const { job_id } = await berth.runAsync(request);
        navigate(`/jobs/${encodeURIComponent(job_id)}`);
      } catch (failure) {
        setError(failure);
        setBusy(false);
      }
      return;
    }
    const controller = new AbortController();
    abort.current = controller;
    setStream({ text: '', running: true });
    try {
      for await (const frame of berth.stream(request, { signal: controller.signal })) {
        if (frame.type === 'output') setStream((s) => ({ ...s!, text: s!.text + frame.content }));
        else if (frame.type === 'done') setStream((s) => ({ ...s!, running: false, sessionId: frame.session_id, runId: frame.id }));
        else setStream((s) => ({ ...s!, running: false, error: new Error(frame.error) }));
      }
      setStream((s) => ({ ...s!, running: false }));
    } catch (failure) {
      setStream((s) => ({ ...s!, running: false, error: isAbortError(failure, controller.signal) ? new Error('stopped: the run was cancelled') : failure }));
    }
  };

  return (
    <section class="card" aria-labelledby="start-run">
      <h2 id="start-run">Start a run</h2>
      <form class="form" onSubmit={submit}>
        <label for="run-prompt">Prompt</label>
        <textarea id="run-prompt" name="prompt" rows={4} required value={prompt} onInput={(e) => setPrompt(e.currentTarget.value)} />
        <label for="run-workdir">Working directory (optional)</label>
        <input
          id="run-workdir"
          name="workdir"
          placeholder="/workspace"
          aria-describedby="run-workdir-help"
          value={workdir}
          onInput={(e) => setWorkdir(e.currentTarget.value)}
        />
        <p id="run-workdir-help" class="help">
          Inside the container; an absolute path.
        </p>
        <fieldset>
          <legend>How</legend>
          <label class="choice">
            <input type="radio" name="mode" value="stream" checked={mode === 'stream'} onChange={() => setMode('stream')} /> Stream the answer here
          </label>
          <label class="choice">
            <input type="radio" name="mode" value="job" checked={mode === 'job'} onChange={() => setMode('job')} /> Queue as an async job
          </label>
        </fieldset>
        <ErrorMessage error={error} context="The run was not started" />
        <div class="actions">
          <button type="submit" class="primary" disabled={busy || stream?.running || prompt.trim() === ''}>
            {mode === 'job' ? 'Start job' : 'Run'}
          </button>
          {stream?.running && (
            <button type="button" onClick={() => abort.current?.abort()}>
              Stop
            </button>
          )}
        </div>
      </form>
      {stream && (
        <div class="run-output">
          <h3>Answer</h3>
          <pre class="output" aria-live="polite" aria-busy={stream.running} data-testid="stream-output">
            {stream.text}
          </pre>
          {stream.running && <p class="help">Streaming…</p>}
          {stream.sessionId && (
            <p>
              Run <code>{stream.runId}</code> completed; session{' '}
              <Link href={`/sessions/${encodeURIComponent(stream.sessionId)}`}>{stream.sessionId}</Link>
              {stream.runId && (
                <>
                  ; its <Link href={`/usage/runs/${encodeURIComponent(stream.runId)}`}>model requests and egress decisions</Link>
                </>
              )}
              .
            </p>
          )}
          <ErrorMessage error={stream.error} context="The run failed" />
        </div>
      )}
    </section>
  );
}

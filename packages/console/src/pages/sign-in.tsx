// Asks for a token. An API token (SERVICE_API_TOKENS; `make up` keeps one in .service/local.env) is
// exchanged for an access and a refresh token, which this tab keeps until it closes; an access token is
// used as it is until it expires.
import { useState } from 'preact/hooks';
import { ErrorMessage } from '../components/error-message.js';
import { Page } from '../components/page.js';

export function SignIn({ notice, onSignIn }: { notice?: string; onSignIn: (token: string) => Promise<void> }) {
  const [token, setToken] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>();

  const submit = async (event: Event) => {
    event.preventDefault();
    setBusy(true);
    setError(undefined);
    try {
      await onSignIn(token.trim());
    } catch (failure) {
      setError(failure);
      setBusy(false);
    }
  };

  return (
    <Page title="Sign in">
      {notice && (
        <p class="notice" role="status">
          {notice}
        </p>
      )}
      <form class="card form sign-in" onSubmit={submit}>
        <label for="token">API token or access token</label>
        <input
          id="token"
          name="token"
          type="password"
          autocomplete="off"
          spellcheck={false}
          required
          aria-describedby="token-help"
          value={token}
          onInput={(event) => setToken(event.currentTarget.value)}
        />
        <p id="token-help" class="help">
          An API token (one of the server's <code>SERVICE_API_TOKENS</code>; after <code>make up</code> it is in{' '}
          <code>.service/local.env</code>) is exchanged for an access token that this tab keeps until it is closed. An
          access token (a JWT from <code>POST /auth/token</code>) is used as it is. You are the API token you sign in
          with: you see the runs, jobs, sessions and agents made with it (in the console, the CLI or the SDK), and no
          one else's.
        </p>
        <ErrorMessage error={error} context="Sign-in failed" />
        <div class="actions">
          <button type="submit" class="primary" disabled={busy || token.trim() === ''}>
            {busy ? 'Signing in…' : 'Sign in'}
          </button>
        </div>
      </form>
    </Page>
  );
}

// A failed call, said in Berth's own words (the error body's text) and announced to screen readers.
// A 401 means the tab's tokens are no longer accepted: the way out is to sign in again.
import { BerthError } from '@berth/client';
import { useContext } from 'preact/hooks';
import { SessionContext } from '../berth-context.js';

export function describeError(error: unknown): string {
  if (error instanceof BerthError) return `${error.error} (HTTP ${error.status})`;
  if (error instanceof Error) return error.message;
  return String(error);
}

export function ErrorMessage({ error, context }: { error: unknown; context?: string }) {
  const session = useContext(SessionContext);
  if (error === undefined || error === null) return null;
  const unauthorized = error instanceof BerthError && error.status === 401;
  return (
    <div class="error" role="alert">
      <p>
        {context ? `${context}: ` : ''}
        {describeError(error)}
      </p>
      {unauthorized && session && (
        <button type="button" onClick={() => session.signOut('Berth no longer accepts this tab\'s token. Sign in again.')}>
          Sign in again
        </button>
      )}
    </div>
  );
}

// The signed-in Berth client and the session's actions, for every page.
import type { Berth } from '@berth/client';
import { createContext } from 'preact';
import { useContext } from 'preact/hooks';

export interface ConsoleSession {
  readonly berth: Berth;
  /** The client id the tokens were issued to; undefined on a server without authentication. */
  readonly subject?: string;
  /** Ends the session and shows the sign-in page with `notice`. */
  signOut(notice?: string): void;
}

export const SessionContext = createContext<ConsoleSession | undefined>(undefined);

export function useSession(): ConsoleSession {
  const session = useContext(SessionContext);
  if (!session) throw new Error('useSession outside a signed-in console');
  return session;
}

export function useBerth(): Berth {
  return useSession().berth;
}

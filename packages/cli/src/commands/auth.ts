// berth login|logout. Login exchanges an API token (asked for without echo, or from --token or stdin) for
// an access and a refresh token, kept in the credentials file for this --url; every later command uses
// them and the SDK refreshes them, saving the rotated pair back. Logout revokes and forgets them.
// Who you are logged in as (`as` below, the tokens' sub) is the API token's name in SERVICE_API_TOKENS, never
// the --client-id: everyone using one API token is one owner, and two API tokens are never one.
import { Command } from 'commander';
import { BerthError, BerthNetworkError } from '@berth/client';
import type { ContextOf } from '../context.js';
import { CliError, Interrupted } from '../errors.js';
import { styled } from '../output.js';

export function loginCommand(contextOf: ContextOf): Command {
  return new Command('login')
    .description('sign in with an API token; the tokens are kept for this --url and refreshed automatically')
    .option('--token <api-token>', 'the API token (else read from stdin, or asked for without echo)')
    .option('--client-id <name>', 'a label for these tokens (default berth-client); who you are, the owner of your runs, jobs and sessions, is the API token\'s name')
    .action(async (options: { token?: string; clientId?: string }, command: Command) => {
      const { berth, url, output, credentials } = contextOf(command);
      const apiToken = (options.token ?? (await readApiToken())).trim();
      if (apiToken === '') throw new CliError('no API token given');
      try {
        await berth.auth.token(apiToken, options.clientId);
      } catch (error) {
        if (error instanceof BerthError && error.status === 401) {
          throw new CliError(`the server refused this API token: ${error.error} (HTTP 401)`, 1, 'use one of the server\'s SERVICE_API_TOKENS (`make up` keeps one in .service/local.env); a server with SERVICE_AUTH_ENABLED=false needs no login');
        }
        throw error;
      }
      const { claims } = await berth.auth.validate();
      output.record({ url, sub: claims.sub, expires_at: new Date(claims.exp * 1000).toISOString(), credentials: credentials.path }, [
        ['logged in to', url],
        ['as', claims.sub],
        ['tokens in', credentials.path],
      ]);
    });
}

export function logoutCommand(contextOf: ContextOf): Command {
  return new Command('logout')
    .description('revoke the stored tokens of this --url and forget them')
    .action(async (_options: unknown, command: Command) => {
      const { berth, url, output, credentials } = contextOf(command);
      if ((await credentials.tokens(url)) === undefined) return output.line(`not logged in to ${url}`);
      try {
        await berth.auth.logout();
      } catch (error) {
        // Tokens the server no longer takes, or a server that is gone: forgetting them is all that is left.
        if (!(error instanceof BerthError && error.status === 401) && !(error instanceof BerthNetworkError)) throw error;
        await credentials.setTokens(url, undefined);
        process.stderr.write(styled(process.stderr, 'yellow', `the server did not revoke the tokens (${error.message}); forgot them here`) + '\n');
      }
      output.record({ url, logged_out: true }, [['logged out of', url]]);
    });
}

/** The API token from stdin when it is piped in, else typed at a prompt that does not echo it. */
async function readApiToken(): Promise<string> {
  if (!process.stdin.isTTY) {
    let text = '';
    for await (const chunk of process.stdin) text += String(chunk);
    return text;
  }
  return askHidden('API token: ');
}

/** Reads one line from the terminal in raw mode, echoing nothing, so the token is never on screen. */
function askHidden(question: string): Promise<string> {
  const { stdin, stderr } = process;
  stderr.write(question);
  stdin.setRawMode(true);
  stdin.setEncoding('utf8');
  stdin.resume();
  return new Promise((resolve, reject) => {
    let typed = '';
    const finish = (outcome: () => void) => {
      stdin.off('data', onData);
      stdin.setRawMode(false);
      stdin.pause();
      stderr.write('\n');
      outcome();
    };
    const onData = (chunk: string) => {
      for (const character of chunk) {
        if (character === '\r' || character === '\n') return finish(() => resolve(typed));
        if (character === '\u0003') return finish(() => reject(new Interrupted('')));
        if (character === '\u0004') return finish(() => (typed === '' ? reject(new CliError('no API token given')) : resolve(typed)));
        if (character === '\u007f' || character === '\b') typed = typed.slice(0, -1);
        else if (character >= ' ') typed += character;
      }
    };
    stdin.on('data', onData);
  });
}

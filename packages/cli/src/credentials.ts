// Where `berth login` keeps the access and refresh tokens: one JSON file, mode 0600, holding the tokens of
// every Berth the user logged in to, keyed by its URL. The SDK reads them through a TokenStore and writes
// rotated ones back after each refresh.
import { chmod, mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import type { TokenStore, Tokens } from '@berth/client';

type TokensByUrl = Record<string, Tokens>;

/** $BERTH_CONFIG_DIR, else $XDG_CONFIG_HOME/berth, else ~/.config/berth. */
export function configDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env.BERTH_CONFIG_DIR) return env.BERTH_CONFIG_DIR;
  return join(env.XDG_CONFIG_HOME || join(homedir(), '.config'), 'berth');
}

/** One key per server whatever way its URL is written: no trailing slash, default ports dropped. */
export function serverKey(url: string): string {
  const parsed = new URL(url);
  return `${parsed.origin}${parsed.pathname.replace(/\/+$/, '')}`;
}

export class CredentialsFile {
  constructor(readonly path: string = join(configDir(), 'credentials.json')) {}

  async tokens(url: string): Promise<Tokens | undefined> {
    return (await this.read())[serverKey(url)];
  }

  /** Stores (or with undefined forgets) one server's tokens, keeping the others'. */
  async setTokens(url: string, tokens: Tokens | undefined): Promise<void> {
    // Read again right before writing: another berth process may have stored another server's tokens.
    const all = await this.read();
    const key = serverKey(url);
    if (tokens === undefined) delete all[key];
    else all[key] = tokens;
    await this.write(all);
  }

  /** The TokenStore the SDK uses for the server at `url`. */
  storeFor(url: string): TokenStore {
    return {
      load: () => this.tokens(url),
      save: (tokens) => this.setTokens(url, tokens),
    };
  }

  private async read(): Promise<TokensByUrl> {
    let text: string;
    try {
      text = await readFile(this.path, 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return {};
      throw error;
    }
    try {
      const parsed: unknown = JSON.parse(text);
      const servers = (parsed as { servers?: unknown }).servers;
      return servers !== null && typeof servers === 'object' ? { ...(servers as TokensByUrl) } : {};
    } catch {
      throw new Error(`${this.path} is not valid JSON; remove it and run \`berth login\` again`);
    }
  }

  private async write(all: TokensByUrl): Promise<void> {
    const dir = dirname(this.path);
    await mkdir(dir, { recursive: true, mode: 0o700 });
    // Written to a private temporary file and renamed over the old one, so no reader ever sees half a file
    // and the tokens are never readable by others, not even for a moment.
    const temporary = `${this.path}.${process.pid}.tmp`;
    await writeFile(temporary, `${JSON.stringify({ servers: all }, null, 2)}\n`, { mode: 0o600 });
    await chmod(temporary, 0o600);
    await rename(temporary, this.path);
  }
}

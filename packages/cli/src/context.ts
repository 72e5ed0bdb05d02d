// What every command works with, built from the global options: the SDK client for the chosen Berth
// (with the tokens `berth login` stored for it), the output format and the credentials file.
import { readFileSync } from 'node:fs';
import { InvalidArgumentError, type Command } from 'commander';
import { Berth } from '@berth/client';
import { CredentialsFile } from './credentials.js';
import { Output, type OutputFormat } from './output.js';

export const DEFAULT_URL = 'http://127.0.0.1:8080';

export interface GlobalOptions {
  readonly url: string;
  readonly output: OutputFormat;
}

export interface Context {
  readonly url: string;
  readonly berth: Berth;
  readonly output: Output;
  readonly credentials: CredentialsFile;
}

/** Gives a command's action its context (from the command's options merged with the global ones). */
export type ContextOf = (command: Command) => Context;

export const contextOf: ContextOf = (command) => {
  const { url, output } = command.optsWithGlobals<GlobalOptions>();
  const credentials = new CredentialsFile();
  const berth = new Berth({ url, tokens: credentials.storeFor(url), userAgent: `berth-cli/${cliVersion()}` });
  return { url, berth, output: new Output(output), credentials };
};

/** The version of this package (package.json), which is Berth's. */
export function cliVersion(): string {
  const manifest = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string };
  return manifest.version;
}

/** commander parser for --url (and BERTH_URL): an http(s) URL, kept as given. */
export function parseUrl(value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new InvalidArgumentError('not a URL (for example http://127.0.0.1:8080)');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new InvalidArgumentError('only http:// and https:// URLs are supported');
  return value.replace(/\/+$/, '');
}

/** commander parser for whole numbers ≥ 0 (--limit, --offset, …). */
export function parseCount(value: string): number {
  if (!/^\d+$/.test(value)) throw new InvalidArgumentError('not a whole number');
  return Number(value);
}

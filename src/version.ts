// What is running: Berth's version, the API version, the pinned engine, and the commit when Berth runs
// from a git checkout (GET /version).
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { BERTH_VERSION, ENGINE_VERSION } from './config.js';

/** The version of the HTTP interface; it changes only when a change breaks existing clients. */
export const API_VERSION = '1';

export interface VersionInfo {
  readonly version: string;
  readonly api_version: string;
  readonly engine_version: string;
  readonly engine_image: string;
  readonly agent_image: string;
  /** The git commit of the checkout Berth runs from; absent when it is not a checkout. */
  readonly commit?: string;
}

/** The commit of the checkout at `dir`, or undefined (no git, not a checkout). */
export async function checkoutCommit(dir: string): Promise<string | undefined> {
  try {
    const { stdout } = await promisify(execFile)('git', ['-C', dir, 'rev-parse', 'HEAD'], { timeout: 5_000 });
    const commit = stdout.trim();
    return /^[0-9a-f]{40}$/.test(commit) ? commit : undefined;
  } catch {
    return undefined;
  }
}

export function versionInfo(images: { readonly engineImage: string; readonly agentImage: string }, commit: string | undefined): VersionInfo {
  return {
    version: BERTH_VERSION,
    api_version: API_VERSION,
    engine_version: ENGINE_VERSION,
    engine_image: images.engineImage,
    agent_image: images.agentImage,
    ...(commit !== undefined ? { commit } : {}),
  };
}

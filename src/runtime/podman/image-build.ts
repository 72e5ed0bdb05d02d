// Image builds through libpod's /build: the context as a tar stream, the answer as a stream of JSON
// messages (a failed step arrives as {"error": …} inside a 200 answer), and a time limit Podman itself
// does not offer. Dropping the connection does not stop a build in Podman's service, so at the limit the
// build's running step is killed instead: each RUN step is a runc container named `buildah-…`, and once
// it is killed the build fails on its own and buildah removes its working container and files.
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { Readable } from 'node:stream';
import { create as createTar } from 'tar';
import { BuildTimeoutError, RuntimeError, type BuildOptions } from '../container-runtime.js';
import type { PodmanClient } from './client.js';

/** How long a build may take to end after its step was killed before Berth stops waiting for it. */
const END_AFTER_KILL_MS = 60_000;

let queue: Promise<unknown> = Promise.resolve();

/**
 * Builds run one at a time: at a timeout, the runc containers that appeared since the build began are
 * that build's steps (a build of the host's operator started meanwhile could be hit too; documented).
 */
export function buildImage(client: PodmanClient, options: BuildOptions): Promise<void> {
  const run = queue.then(() => buildNow(client, options));
  queue = run.catch(() => undefined);
  return run;
}

async function buildNow(client: PodmanClient, options: BuildOptions): Promise<void> {
  const before = new Set(await buildSteps());
  // Links are archived as links, never followed: the build sees exactly the (staged) context directory.
  const context = createTar({ cwd: options.contextDir, portable: true, follow: false }, ['.']);
  const giveUp = new AbortController();
  let timedOut = false;
  const killer = setTimeout(() => {
    timedOut = true;
    void killSteps(before, giveUp.signal);
    setTimeout(() => giveUp.abort(), END_AFTER_KILL_MS).unref();
  }, options.timeoutMs);
  try {
    const response = await client.request('/build', {
      method: 'POST',
      query: {
        dockerfile: options.dockerfile,
        t: options.tag,
        buildargs: JSON.stringify(options.args),
        labels: JSON.stringify(options.labels),
        target: options.target,
        rm: true,
        forcerm: true,
      },
      body: Readable.from(context as unknown as AsyncIterable<Buffer>),
      contentType: 'application/x-tar',
      signal: giveUp.signal,
    });
    const { failure, tail } = await readBuildStream(response.body as unknown as Readable);
    if (timedOut) throw new BuildTimeoutError(options.timeoutMs);
    if (failure !== undefined) throw new RuntimeError(`${failure}${tail.length > 0 ? ` (last output: ${tail.join(' | ')})` : ''}`, false);
  } catch (error) {
    if (timedOut) throw new BuildTimeoutError(options.timeoutMs);
    throw error;
  } finally {
    clearTimeout(killer);
    giveUp.abort();
  }
}

async function readBuildStream(body: Readable): Promise<{ failure: string | undefined; tail: string[] }> {
  let failure: string | undefined;
  const tail: string[] = [];
  for await (const line of createInterface({ input: body, crlfDelay: Infinity })) {
    let message: { stream?: string; error?: string };
    try {
      message = JSON.parse(line) as { stream?: string; error?: string };
    } catch {
      continue;
    }
    if (message.error) failure = message.error.trim();
    if (message.stream) tail.push(...message.stream.split('\n').filter((text) => text.trim() !== ''));
    tail.splice(0, Math.max(0, tail.length - 5));
  }
  return { failure, tail };
}

/** Kills every build step that was not there before, until the build has ended (the signal). */
async function killSteps(before: ReadonlySet<string>, ended: AbortSignal): Promise<void> {
  while (!ended.aborted) {
    for (const id of await buildSteps()) {
      if (!before.has(id)) await runc(['kill', id, 'KILL']).catch(() => undefined);
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

async function buildSteps(): Promise<string[]> {
  const listed = await runc(['list', '--quiet']).catch(() => '');
  return listed.split('\n').filter((id) => id.startsWith('buildah-'));
}

function runc(args: readonly string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn('runc', args, { stdio: ['ignore', 'pipe', 'ignore'] });
    let out = '';
    child.stdout!.on('data', (chunk: Buffer) => (out += chunk.toString()));
    child.once('error', reject);
    child.once('close', (code) => (code === 0 ? resolve(out) : reject(new Error(`runc ${args[0]}: exit ${code}`))));
  });
}

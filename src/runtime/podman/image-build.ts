// Image builds through libpod's /build: the context as a tar Berth packs itself, the answer as a stream of
// JSON messages (a failed step arrives as {"error": …} inside a 200 answer), and a time limit Podman itself
// does not offer. Dropping the connection does not stop a build in Podman's service, so at the limit the
// build's running step is killed instead: each RUN step is a runc container named `buildah-…`, and once
// it is killed the build fails on its own and buildah removes its working container and files.
//
// Confinement (docs/compose.md, "Builds"): without `nsoptions` libpod runs every RUN step in the HOST's
// network namespace, as host root, and pulls what FROM names. Here each step gets a network namespace of
// its own with nothing configured in it (only `lo`: no route to the host or anywhere), the pull policy
// `never`, and a user namespace: a rootful Berth builds with rootless Podman as an unprivileged system
// user (./rootless-build.ts explains why the API cannot); a rootless Berth's builds are in its own.
import { spawn } from 'node:child_process';
import { createReadStream } from 'node:fs';
import { mkdtemp, readlink, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, posix } from 'node:path';
import { createInterface } from 'node:readline';
import type { Readable } from 'node:stream';
import { create as createTar, list as listTar, type ReadEntry } from 'tar';
import { BuildContextError, BuildTimeoutError, sandboxPrefix, type BuildOptions } from '../ports/builds.js';
import { RuntimeError } from '../ports/runtime-error.js';
import type { PodmanClient } from './client.js';
import { buildRootless } from './rootless-build.js';

/** How long a build may take to end after its step was killed before Berth stops waiting for it. */
const END_AFTER_KILL_MS = 60_000;
/** A Containerfile larger than this is not read (nor built). */
const MAX_CONTAINERFILE_BYTES = 1024 * 1024;
/** The end of a failed build's own output that its error carries: a few short lines, never more. */
const TAIL_LINES = 5;
const TAIL_LINE_CHARS = 200;
const CPU_PERIOD_US = 100_000;

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
  const workDir = await mkdtemp(join(tmpdir(), `${sandboxPrefix(options)}context-`));
  try {
    const tarPath = join(workDir, 'context.tar');
    const containerfile = await packContext(options.contextDir, tarPath, options.dockerfile, options.maxContextBytes);
    // Checked from the archive itself: what is checked is byte for byte what Podman builds.
    const images = await options.checkContainerfile(containerfile);
    if (options.userNamespace.kind === 'mapped') {
      const subordinateBase = options.userNamespace.hostBase + options.userNamespace.size;
      await buildRootless(client, { options, tarPath, images, subordinateBase, tail: outputTail });
    } else {
      await sendBuild(client, options, tarPath);
    }
  } finally {
    await rm(workDir, { recursive: true, force: true });
  }
}

async function sendBuild(client: PodmanClient, options: BuildOptions, tarPath: string): Promise<void> {
  const before = new Set(await buildSteps());
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
        ...confinement(options),
      },
      body: createReadStream(tarPath),
      contentType: 'application/x-tar',
      signal: giveUp.signal,
    });
    const { failure, tail } = await readBuildStream(response.body as unknown as Readable);
    if (timedOut) throw new BuildTimeoutError(options.timeoutMs);
    if (failure !== undefined) throw new RuntimeError(`${bounded(failure)}${tail.length > 0 ? ` (last output: ${tail.join(' | ')})` : ''}`, false);
  } catch (error) {
    if (timedOut) throw new BuildTimeoutError(options.timeoutMs);
    throw error;
  } finally {
    clearTimeout(killer);
    giveUp.abort();
  }
}

/** The query parameters that confine a (rootless Podman's) build's steps: buildah's NamespaceOptions as JSON. */
export function confinement(options: Pick<BuildOptions, 'memoryBytes' | 'cpus'>): Record<string, string | number> {
  return {
    isolation: 'oci',
    // A network namespace of the step's own, left unconfigured: loopback only.
    networkmode: 'NetworkDisabled',
    nsoptions: JSON.stringify([{ Name: 'network', Host: false, Path: '' }]),
    pullpolicy: 'never',
    memory: options.memoryBytes,
    memswap: options.memoryBytes,
    cpuperiod: CPU_PERIOD_US,
    cpuquota: Math.round(options.cpus * CPU_PERIOD_US),
  };
}

/** The end of a build's output as its error carries it: the last lines, each bounded. */
function outputTail(output: string): string {
  return output.split('\n').filter((line) => line.trim() !== '').slice(-TAIL_LINES).map(bounded).join(' | ');
}

/**
 * Packs the context into `tarPath` and answers the Containerfile's text as archived. Links are archived as
 * links, never followed, and a link that points out of the context (absolute, or up past its root) is
 * left out; file data beyond `maxBytes` fails the packing. The archive is then read back and checked
 * (sizes, links, the Containerfile a regular file), since the directory may change while it is packed.
 */
async function packContext(contextDir: string, tarPath: string, dockerfile: string, maxBytes: number): Promise<string> {
  const outward = await pack(contextDir, tarPath, maxBytes, new Set());
  // Rare: a second pass without the links that point out of the context keeps the first one simple.
  if (outward.size > 0) await pack(contextDir, tarPath, maxBytes, outward);
  return readBack(tarPath, dockerfile, maxBytes);
}

/**
 * Archives the context without following links, leaving out `drop`, counting file sizes up to `maxBytes`
 * (a 400 past it); answers the links found pointing out of the context.
 */
async function pack(contextDir: string, tarPath: string, maxBytes: number, drop: ReadonlySet<string>): Promise<Set<string>> {
  let total = 0;
  let tooLarge = false;
  const pending: Promise<void>[] = [];
  const outward = new Set<string>();
  await rm(tarPath, { force: true });
  await createTar(
    {
      cwd: contextDir,
      file: tarPath,
      portable: true,
      follow: false,
      filter: (path, stat) => {
        if (drop.has(path) || tooLarge) return false;
        if ('isSymbolicLink' in stat && stat.isSymbolicLink()) {
          // Decided after reading the link; the archive is checked again (readBack) in any case.
          pending.push(readlink(join(contextDir, path)).then((target) => {
            if (pointsOutside(path, target)) outward.add(path);
          }, () => undefined));
        }
        if ('isFile' in stat && stat.isFile()) {
          total += stat.size;
          if (total > maxBytes) tooLarge = true;
        }
        return !tooLarge;
      },
    },
    ['.'],
  );
  await Promise.all(pending);
  if (tooLarge) throw tooLargeError(maxBytes);
  return outward;
}

async function readBack(tarPath: string, dockerfile: string, maxBytes: number): Promise<string> {
  const wanted = posix.normalize(dockerfile);
  let total = 0;
  let containerfile: Buffer[] | undefined;
  let containerfileType: string | undefined;
  let outward: string | undefined;
  await listTar({
    file: tarPath,
    onReadEntry: (entry: ReadEntry) => {
      const path = posix.normalize(entry.path);
      if (entry.type === 'File' || entry.type === 'OldFile' || entry.type === 'ContiguousFile') total += entry.size ?? 0;
      if (entry.type === 'SymbolicLink' && pointsOutside(entry.path, entry.linkpath ?? '')) outward = path;
      if (path === wanted) {
        containerfileType = entry.type;
        if (entry.type === 'File' && (entry.size ?? 0) <= MAX_CONTAINERFILE_BYTES) {
          const chunks: Buffer[] = [];
          containerfile = chunks;
          entry.on('data', (chunk: Buffer) => chunks.push(chunk));
        }
      }
    },
  });
  if (total > maxBytes) throw tooLargeError(maxBytes);
  if (outward !== undefined) throw new BuildContextError(`"${outward}" changed into a link out of the context while it was packed`, 'containerfile');
  if (containerfileType === undefined) throw new BuildContextError(`dockerfile "${dockerfile}" is not a file in the build context`, 'containerfile');
  if (containerfileType !== 'File') throw new BuildContextError(`dockerfile "${dockerfile}" is not a regular file in the build context (a link or a directory)`, 'containerfile');
  if (!containerfile) throw new BuildContextError(`dockerfile "${dockerfile}" is larger than ${MAX_CONTAINERFILE_BYTES} bytes`, 'containerfile');
  return Buffer.concat(containerfile).toString('utf8');
}

function tooLargeError(maxBytes: number): BuildContextError {
  return new BuildContextError(`the build context holds more than ${maxBytes} bytes of files`, 'too-large');
}

/** Whether a link at `path` (relative to the context's root) to `target` leads out of the context. */
export function pointsOutside(path: string, target: string): boolean {
  if (target.startsWith('/')) return true;
  const resolved = posix.normalize(posix.join(posix.dirname(posix.normalize(path)), target));
  return resolved === '..' || resolved.startsWith('../');
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
    if (message.stream) tail.push(...message.stream.split('\n').filter((text) => text.trim() !== '').map(bounded));
    tail.splice(0, Math.max(0, tail.length - TAIL_LINES));
  }
  return { failure, tail };
}

/** One line of build output as an error may carry it: control characters dropped, its length capped. */
function bounded(text: string): string {
  // eslint-disable-next-line no-control-regex
  const printable = text.replace(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g, '');
  return printable.length > TAIL_LINE_CHARS ? `${printable.slice(0, TAIL_LINE_CHARS)}…` : printable;
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

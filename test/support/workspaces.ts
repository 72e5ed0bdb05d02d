// Helpers for workspace tests against a real Berth: requests whose path is sent exactly as written (fetch
// would normalise `..` away before the server saw it), planting entries in a tree as a run would (on the
// disk mount, not the API's view, while a lease holds the workspace), and the leak check after a stop.
import { execFile } from 'node:child_process';
import { request as httpRequest } from 'node:http';
import { promisify } from 'node:util';
import { mountPoints } from '../../src/runtime/run-disk.js';
import type { TestBerth } from './berth.js';

const exec = promisify(execFile);

export interface RawAnswer {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: Buffer;
  readonly text: string;
}

/** One HTTP request with `path` sent byte for byte as given (no normalisation, no re-encoding). */
export function rawRequest(url: string, method: string, path: string, options: { body?: Buffer | string; headers?: Record<string, string>; timeoutMs?: number } = {}): Promise<RawAnswer> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: hostname, port, method, path, headers: options.headers, timeout: options.timeoutMs ?? 30_000, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => {
        const body = Buffer.concat(chunks);
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body, text: body.toString('utf8') });
      });
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`${method} ${path}: no answer within ${options.timeoutMs ?? 30_000} ms`)));
    req.on('error', reject);
    req.end(options.body);
  });
}

/**
 * Runs `plant(treeHostPath)` while a lease holds the workspace, as a run's container would write its tree:
 * on the disk mount (where links are followed), then gives the workspace back.
 */
export async function asRun<T>(t: TestBerth, owner: string, id: string, plant: (tree: string) => Promise<T>): Promise<T> {
  const lease = await t.berth.workspaces.acquire(owner, id, { kind: 'run', id: `run-test-${Date.now()}` });
  try {
    return await plant(lease.treeHostPath);
  } finally {
    await lease.release();
  }
}

/** Mounts and loop devices below the test Berth's directory (none may be left once it has stopped). */
export async function mountsAndLoopsOf(dir: string): Promise<{ mounts: string[]; loops: string[] }> {
  const mounts = [...(await mountPoints())].filter((path) => path.startsWith(`${dir}/`));
  const { stdout } = await exec('losetup', ['--list', '--noheadings', '--output', 'NAME,BACK-FILE']);
  const loops = stdout.split('\n').filter((line) => line.includes(`${dir}/`));
  return { mounts, loops };
}

/**
 * Uploads `totalBytes` of zeros as a chunked body (no Content-Length: the server cannot refuse it early)
 * and answers the response; a server that answers before the end stops the upload.
 */
export function chunkedUpload(url: string, path: string, headers: Record<string, string>, totalBytes: number): Promise<RawAnswer> {
  const { hostname, port } = new URL(url);
  const chunk = Buffer.alloc(1 << 20);
  return new Promise((resolve, reject) => {
    let answered = false;
    const req = httpRequest({ host: hostname, port, method: 'PUT', path, headers: { ...headers, 'content-type': 'application/octet-stream' }, agent: false }, (res) => {
      answered = true;
      const chunks: Buffer[] = [];
      res.on('data', (data: Buffer) => chunks.push(data));
      res.on('end', () => {
        const body = Buffer.concat(chunks);
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body, text: body.toString('utf8') });
      });
    });
    req.on('error', (error) => {
      if (!answered) reject(error);
    });
    let sent = 0;
    const pump = (): void => {
      while (sent < totalBytes && !answered) {
        const part = chunk.subarray(0, Math.min(chunk.length, totalBytes - sent));
        sent += part.length;
        if (!req.write(part)) {
          req.once('drain', pump);
          return;
        }
      }
      req.end();
    };
    pump();
  });
}

/**
 * What is left mounted or attached below `dir` once the kernel has had a moment. A loop device is detached
 * after the last unmount of its file system, asynchronously on this kernel (listed for a moment after the
 * stop), and not before every mount namespace that copied the mount has let go of it: the host's mounts are
 * private here, so a namespace another process creates meanwhile (a container being set up, a build
 * sandbox) holds its copy for a while (seen: more than 3 s, gone later, with nothing mounted in Berth's).
 */
export async function leftAfterStop(dir: string, withinMs = 15_000): Promise<{ mounts: string[]; loops: string[] }> {
  const deadline = Date.now() + withinMs;
  for (;;) {
    const left = await mountsAndLoopsOf(dir);
    if ((left.mounts.length === 0 && left.loops.length === 0) || Date.now() > deadline) return left;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

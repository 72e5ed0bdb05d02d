// A git server for clone tests: bare repositories served over git's smart HTTP by `git http-backend` (CGI)
// from the test process on loopback, under a host name the test Berth's egress proxy resolves to it
// (startTestBerth's egressHosts): clone containers reach it only through the proxy, as an outside host.
// `git clone --depth 1` needs the smart protocol (the dumb one has no shallow clones). Per repository: an
// optional password (basic auth, any user name accepted but recorded), or a behaviour for failure tests:
// `hang` accepts the request and never answers, `echo-password` authenticates and then answers with an
// ERR packet that repeats the password (git prints it as "remote error: …").
import { execFile, spawn } from 'node:child_process';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { mkdir, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';

const exec = promisify(execFile);

export interface RepoOptions {
  readonly password?: string;
  readonly behaviour?: 'serve' | 'hang' | 'echo-password';
}

export interface GitServer {
  /** The URL containers on the agent network use for a repository name (`name.git`). */
  url(name: string): string;
  /** Its `host:port`, as an egress allowlist names it. */
  readonly host: string;
  /** User names presented with a correct password, per repository. */
  readonly users: Map<string, string[]>;
  /** Requests seen, per repository. */
  readonly requests: Map<string, number>;
  close(): Promise<void>;
}

/** A bare repository `name.git` under `root` made from files (path → content, or `{ symlink }`), on branch main, and a second branch. */
export async function makeRepository(
  root: string,
  name: string,
  files: Readonly<Record<string, string | { readonly symlink: string }>>,
  branches: Readonly<Record<string, Readonly<Record<string, string>>>> = {},
): Promise<void> {
  const work = join(root, `${name}.work`);
  await mkdir(work, { recursive: true });
  const git = (...args: string[]) => exec('git', ['-C', work, '-c', 'user.name=t', '-c', 'user.email=t@example.com', ...args]);
  await git('init', '-q', '-b', 'main');
  const write = async (entries: Readonly<Record<string, string | { readonly symlink: string }>>) => {
    for (const [path, content] of Object.entries(entries)) {
      await mkdir(dirname(join(work, path)), { recursive: true });
      if (typeof content === 'string') await writeFile(join(work, path), content);
      else await exec('ln', ['-s', content.symlink, join(work, path)]);
    }
    await git('add', '-A');
    await git('commit', '-q', '-m', 'files');
  };
  await write(files);
  for (const [branch, extra] of Object.entries(branches)) {
    await git('checkout', '-q', '-b', branch);
    await write(extra);
    await git('checkout', '-q', 'main');
  }
  await exec('git', ['clone', '-q', '--bare', work, join(root, `${name}.git`)]);
}

export async function startGitServer(root: string, repos: Readonly<Record<string, RepoOptions>>, host: string): Promise<GitServer> {
  const users = new Map<string, string[]>();
  const requests = new Map<string, number>();
  const hanging = new Set<ServerResponse>();
  const sockets = new Set<Socket>();
  const server: Server = createServer((request, response) => {
    const url = new URL(request.url ?? '/', 'http://x');
    const name = /^\/([A-Za-z0-9_-]+)\.git(?:\/|$)/.exec(url.pathname)?.[1];
    const options = name === undefined ? undefined : repos[name];
    if (name === undefined || options === undefined) return void response.writeHead(404).end();
    requests.set(name, (requests.get(name) ?? 0) + 1);
    if (options.behaviour === 'hang') return void hanging.add(response);
    if (options.password !== undefined) {
      const [user, password] = basicAuth(request);
      if (password !== options.password) {
        return void response.writeHead(401, { 'www-authenticate': 'Basic realm="test"' }).end();
      }
      users.set(name, [...(users.get(name) ?? []), user ?? '']);
      if (options.behaviour === 'echo-password') {
        const pkt = (text: string) => `${(text.length + 4).toString(16).padStart(4, '0')}${text}`;
        response.writeHead(200, { 'content-type': 'application/x-git-upload-pack-advertisement', 'cache-control': 'no-cache' });
        return void response.end(`${pkt('# service=git-upload-pack\n')}0000${pkt(`ERR access denied for password ${options.password}\n`)}`);
      }
    }
    cgi(root, request, response, url);
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    host: `${host}:${port}`,
    url: (name) => `http://${host}:${port}/${name}.git`,
    users,
    requests,
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

function basicAuth(request: IncomingMessage): [string | undefined, string | undefined] {
  const header = request.headers.authorization ?? '';
  if (!header.startsWith('Basic ')) return [undefined, undefined];
  const decoded = Buffer.from(header.slice(6), 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  return colon < 0 ? [decoded, undefined] : [decoded.slice(0, colon), decoded.slice(colon + 1)];
}

/** `git http-backend` as a CGI: request body on stdin, headers then body on stdout. */
function cgi(root: string, request: IncomingMessage, response: ServerResponse, url: URL): void {
  const child = spawn('git', ['http-backend'], {
    env: {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      GIT_PROJECT_ROOT: root,
      GIT_HTTP_EXPORT_ALL: '1',
      REQUEST_METHOD: request.method ?? 'GET',
      PATH_INFO: decodeURIComponent(url.pathname),
      QUERY_STRING: url.search.slice(1),
      CONTENT_TYPE: request.headers['content-type'] ?? '',
      ...(request.headers['content-length'] ? { CONTENT_LENGTH: request.headers['content-length'] } : {}),
      ...(request.headers['content-encoding'] ? { HTTP_CONTENT_ENCODING: request.headers['content-encoding'] } : {}),
      GIT_PROTOCOL: String(request.headers['git-protocol'] ?? ''),
      REMOTE_ADDR: request.socket.remoteAddress ?? '',
    },
    stdio: ['pipe', 'pipe', 'ignore'],
  });
  request.pipe(child.stdin);
  child.stdin.on('error', () => undefined);
  let head = Buffer.alloc(0);
  let headersDone = false;
  child.stdout.on('data', (chunk: Buffer) => {
    if (headersDone) return void response.write(chunk);
    head = Buffer.concat([head, chunk]);
    const end = head.indexOf('\r\n\r\n');
    if (end < 0) return;
    headersDone = true;
    let status = 200;
    for (const line of head.subarray(0, end).toString('latin1').split('\r\n')) {
      const colon = line.indexOf(':');
      const key = line.slice(0, colon).trim();
      const value = line.slice(colon + 1).trim();
      if (key.toLowerCase() === 'status') status = Number.parseInt(value, 10);
      else response.setHeader(key, value);
    }
    response.writeHead(status);
    response.write(head.subarray(end + 4));
  });
  child.on('close', () => response.end());
}

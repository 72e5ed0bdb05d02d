// berth run "prompt": a run in a fresh container. Printed as it streams (GET /run/stream) when the options
// allow it, else answered at once by POST /run; --async queues it as a job. Ctrl-C aborts the request,
// and the server removes the run's container when its client goes away.
import { Command, InvalidArgumentError, Option } from 'commander';
import type { Berth, ContainerOptions, NetworkMode, NetworkPolicy, RunRequest } from '@berth/client';
import type { Context, ContextOf } from '../context.js';
import { CliError, Interrupted } from '../errors.js';
import { onInterrupt } from '../interrupt.js';
import { NETWORK_MODES, networkPolicy } from '../network-option.js';
import { styled } from '../output.js';
import { Spinner } from '../spinner.js';
import { visible } from '../terminal-text.js';

export interface RunOptions {
  readonly workdir?: string;
  readonly workspace?: string;
  readonly model?: string;
  readonly image?: string;
  readonly volume?: string[];
  readonly memory?: string;
  readonly cpus?: string;
  readonly timeout?: string;
  readonly network?: NetworkMode;
  readonly allow?: string[];
  readonly resume?: string;
  readonly fork?: string;
  readonly continue?: boolean;
  readonly async?: boolean;
  readonly webhook?: string;
  readonly json?: boolean;
}

export function runCommand(contextOf: ContextOf): Command {
  return new Command('run')
    .summary('run a prompt in a fresh container and print the answer as it streams')
    .description('Run a prompt in a fresh container and print the answer as it streams. Ctrl-C cancels the run (its container is removed).')
    .argument('<prompt>', 'what to ask, e.g. "say: hi"')
    .option('-w, --workdir <path>', 'working directory inside the container (default /workspace)')
    .option('--workspace <id>', 'mount this workspace (berth push) read-write at the working directory')
    .option('-m, --model <model>', 'model name or alias, e.g. sonnet')
    .option('--image <image>', 'base image of the container (glibc-based, present on the server)')
    .option('-v, --volume <host:container[:options]>', 'mount a host directory the server allows (repeatable)', collect)
    .option('--memory <size>', 'memory limit, e.g. 512m, 2g')
    .option('--cpus <number>', 'CPU limit, e.g. 0.5, 2')
    .option('--timeout <duration>', 'maximum runtime, e.g. 5m, 1h')
    .addOption(new Option('--network <mode>', "what the run may reach through Berth's egress proxy (default: the server's allowlist)").choices(NETWORK_MODES))
    .option('--allow <host>', 'a host the run may reach, e.g. pypi.org, *.npmjs.org, example.com:8443 (repeatable; means --network allowlist)', collect)
    .addOption(new Option('--resume <session-id>', 'continue a session').conflicts(['fork', 'continue']))
    .addOption(new Option('--fork <session-id>', 'start a new session branched from this one').conflicts('continue'))
    .option('--continue', 'continue the most recent session of the working directory')
    .option('--async', 'queue the run as a job and print its id (then: berth jobs wait <id>)')
    .option('--webhook <url>', 'with --async: URL notified when the job ends')
    .option('--json', 'print the whole answer as JSON (id, output, session_id, usage; with --async: job_id, session_id)')
    .action(async (prompt: string, options: RunOptions, command: Command) => {
      if (options.webhook !== undefined && !options.async) command.error('error: --webhook needs --async');
      let request: RunRequest;
      try {
        request = runRequest(prompt, options);
      } catch (error) {
        if (error instanceof InvalidArgumentError) command.error(`error: ${error.message}`);
        throw error;
      }
      const context = contextOf(command);
      const json = options.json === true || context.output.format === 'json';
      if (options.async) return queue(context, { ...request, ...(options.webhook ? { webhook_url: options.webhook } : {}) }, json);
      if (!json && streamable(request)) return stream(context, request);
      return runAndWait(context, request, json);
    });
}

function collect(value: string, previous: string[] | undefined): string[] {
  return [...(previous ?? []), value];
}

/** The request the options describe (exported for the unit tests of the command line). */
export function runRequest(prompt: string, options: RunOptions): RunRequest {
  const session = options.resume ?? options.fork;
  const engine = {
    ...(options.model !== undefined ? { model: options.model } : {}),
    ...(session !== undefined ? { session_id: session } : {}),
    ...(options.resume !== undefined ? { resume: true } : {}),
    ...(options.fork !== undefined ? { fork_session: true } : {}),
    ...(options.continue ? { continue: true } : {}),
  };
  const container: ContainerOptions = {
    ...(options.image !== undefined ? { image: options.image } : {}),
    ...(options.volume !== undefined ? { volumes: options.volume } : {}),
    ...(options.memory !== undefined ? { memory: options.memory } : {}),
    ...(options.cpus !== undefined ? { cpus: options.cpus } : {}),
    ...(options.timeout !== undefined ? { timeout: options.timeout } : {}),
  };
  const network = networkPolicy(options.network, options.allow);
  if (network !== undefined) container.network = network;
  return {
    prompt,
    ...(options.workdir !== undefined ? { workdir: options.workdir } : {}),
    ...(options.workspace !== undefined ? { workspace: options.workspace } : {}),
    ...(Object.keys(engine).length > 0 ? { engine } : {}),
    ...(Object.keys(container).length > 0 ? { container } : {}),
  };
}

/**
 * GET /run/stream takes a prompt, a workdir, a workspace, a session to resume and the egress policy
 * (container.network); anything else needs POST /run.
 */
function streamable(request: RunRequest): boolean {
  const { model, fork_session, continue: latest, ...rest } = request.engine ?? {};
  const containerOptions = Object.keys(request.container ?? {});
  return containerOptions.every((key) => key === 'network') && model === undefined && !fork_session && !latest && Object.keys(rest).every((key) => key === 'session_id' || key === 'resume');
}

async function stream(context: Context, request: RunRequest): Promise<void> {
  const interrupt = onInterrupt();
  const spinner = new Spinner('starting the run');
  let atLineStart = true;
  let sessionId: string | undefined;
  try {
    const frames = context.berth.stream(
      {
        prompt: request.prompt,
        ...(request.workdir !== undefined ? { workdir: request.workdir } : {}),
        ...(request.workspace !== undefined ? { workspace: request.workspace } : {}),
        ...(request.engine?.session_id !== undefined ? { session_id: request.engine.session_id, resume: true } : {}),
        ...streamNetwork(request.container?.network),
      },
      { signal: interrupt.signal },
    );
    for await (const frame of frames) {
      if (frame.type === 'output') {
        spinner.stop();
        process.stdout.write(visible(frame.content));
        if (frame.content !== '') atLineStart = frame.content.endsWith('\n');
      } else if (frame.type === 'done') {
        sessionId = frame.session_id;
      } else if (frame.type === 'error') {
        throw new CliError(frame.error);
      }
    }
  } catch (error) {
    throw interrupt.signal.aborted ? new Interrupted('cancelled') : error;
  } finally {
    spinner.stop();
    interrupt.dispose();
    if (!atLineStart) process.stdout.write('\n');
  }
  if (sessionId !== undefined) continueHint(sessionId);
}

async function runAndWait(context: Context, request: RunRequest, json: boolean): Promise<void> {
  const interrupt = onInterrupt();
  const spinner = new Spinner('running');
  let answer: Awaited<ReturnType<Berth['run']>>;
  try {
    answer = await context.berth.run(request, { signal: interrupt.signal });
  } catch (error) {
    throw interrupt.signal.aborted ? new Interrupted('cancelled') : error;
  } finally {
    spinner.stop();
    interrupt.dispose();
  }
  if (json) return context.output.json(answer);
  const output = visible(answer.output);
  process.stdout.write(output.endsWith('\n') || output === '' ? output : `${output}\n`);
  continueHint(answer.session_id);
}

async function queue(context: Context, request: RunRequest & { webhook_url?: string }, json: boolean): Promise<void> {
  const job = await context.berth.runAsync(request);
  if (json) return context.output.json(job);
  context.output.line(job.job_id);
  if (process.stderr.isTTY) process.stderr.write(styled(process.stderr, 'dim', `follow it with: berth jobs wait ${job.job_id}`) + '\n');
}

/** On a terminal, how to go on with the conversation (stderr, so the answer on stdout stays clean). */
function continueHint(sessionId: string): void {
  if (!process.stderr.isTTY) return;
  process.stderr.write(styled(process.stderr, 'dim', `session ${sessionId} · continue it with: berth run --resume ${sessionId} "…"`) + '\n');
}

/** container.network as GET /run/stream's `network` and `allow` (comma-separated) query parameters. */
function streamNetwork(network: NetworkPolicy | undefined): { network?: NetworkMode; allow?: string } {
  if (network === undefined) return {};
  return {
    ...(network.mode !== undefined ? { network: network.mode } : {}),
    ...(network.allow !== undefined ? { allow: network.allow.join(',') } : {}),
  };
}

// berth agents spawn|ls|show|rm|chat: persistent agents, one engine process per container taking many turns.
import { Command, InvalidArgumentError, Option } from 'commander';
import type { Agent, NetworkMode, NetworkPolicy } from '@berth/client';
import { chat } from '../chat.js';
import { parseCount, type Context, type ContextOf } from '../context.js';
import { NETWORK_MODES, networkPolicy } from '../network-option.js';
import { shortTime, styled } from '../output.js';

interface SpawnOptions {
  readonly prompt?: string;
  readonly workdir?: string;
  readonly workspace?: string;
  readonly model?: string;
  readonly network?: NetworkMode;
  readonly allow?: string[];
  /** Seconds, or false for --no-idle-timeout. */
  readonly idleTimeout?: number | false;
}

export function agentsCommand(contextOf: ContextOf): Command {
  const agents = new Command('agents').summary('spawn, list, chat with and remove persistent agents').description('Persistent agents: one long-lived engine in one container, taking many turns in one session.');

  agents
    .command('spawn')
    .description('start an agent (then: berth agents chat <id>)')
    .option('-p, --prompt <text>', 'a first turn, sent as soon as the agent is ready')
    .option('-w, --workdir <path>', 'working directory inside the container (default /workspace)')
    .option('--workspace <id>', 'mount this workspace (berth push) read-write at the working directory; held while the agent lives')
    .option('-m, --model <model>', 'model name or alias, e.g. sonnet')
    .addOption(new Option('--network <mode>', "what the agent may reach through Berth's egress proxy (default: the server's allowlist)").choices(NETWORK_MODES))
    .option('--allow <host>', 'a host the agent may reach, e.g. pypi.org, *.npmjs.org, example.com:8443 (repeatable; means --network allowlist)', (value: string, previous: string[] | undefined) => [...(previous ?? []), value])
    .option('--idle-timeout <seconds>', "stop the agent after this long without a turn (default: the server's)", parseCount)
    .option('--no-idle-timeout', 'keep the agent until it is removed')
    .action(async (options: SpawnOptions, command: Command) => {
      let network: NetworkPolicy | undefined;
      try {
        network = networkPolicy(options.network, options.allow);
      } catch (error) {
        if (error instanceof InvalidArgumentError) command.error(`error: ${error.message}`);
        throw error;
      }
      const context = contextOf(command);
      const agent = await context.berth.agents.spawn({
        ...(options.prompt !== undefined ? { prompt: options.prompt } : {}),
        ...(options.workdir !== undefined ? { workdir: options.workdir } : {}),
        ...(options.workspace !== undefined ? { workspace: options.workspace } : {}),
        ...(options.model !== undefined ? { engine: { model: options.model } } : {}),
        ...(network !== undefined ? { container: { network } } : {}),
        ...(typeof options.idleTimeout === 'number' ? { idle_timeout_seconds: options.idleTimeout } : {}),
        ...(options.idleTimeout === false ? { disable_idle_timeout: true } : {}),
      });
      printAgent(context, agent);
      if (context.output.format === 'table' && process.stderr.isTTY) process.stderr.write(styled(process.stderr, 'dim', `chat with it: berth agents chat ${agent.id}`) + '\n');
    });

  agents
    .command('ls')
    .description('list agents, oldest first (exited ones until their record expires)')
    .action(async (_options: unknown, command: Command) => {
      const { berth, output } = contextOf(command);
      const list = await berth.agents.list();
      output.list(list, list.agents, [
        { header: 'ID', value: (agent) => agent.id },
        { header: 'STATUS', value: (agent) => agent.status },
        { header: 'TURNS', value: (agent) => String(agent.turns_completed) },
        { header: 'CREATED', value: (agent) => shortTime(agent.created_at) },
        { header: 'LAST ACTIVITY', value: (agent) => shortTime(agent.last_activity_at) },
      ], 'no agents');
    });

  agents
    .command('show')
    .description("show an agent's snapshot")
    .argument('<id>', 'agent id (agent-…)')
    .action(async (id: string, _options: unknown, command: Command) => {
      const context = contextOf(command);
      printAgent(context, await context.berth.agents.get(id));
    });

  agents
    .command('rm')
    .description('stop an agent and remove its container')
    .argument('<id>', 'agent id (agent-…)')
    .action(async (id: string, _options: unknown, command: Command) => {
      const { berth, output } = contextOf(command);
      await berth.agents.delete(id);
      output.record({ id, removed: true }, [['removed', id]]);
    });

  agents
    .command('chat')
    .description('chat with an agent: each line is a turn, its answer shown as it streams; Ctrl-D leaves')
    .argument('<id>', 'agent id (agent-…)')
    .option('--rm', 'remove the agent when leaving the chat')
    .action(async (id: string, options: { rm?: boolean }, command: Command) => {
      await chat(contextOf(command), id, options);
    });

  return agents;
}

function printAgent({ output }: Context, agent: Agent): void {
  output.record(agent, [
    ['id', agent.id],
    ['status', agent.status],
    ['session', agent.session_id],
    ['turns', String(agent.turns_completed)],
    ['created', shortTime(agent.created_at)],
    ['idle timeout', agent.idle_timeout_disabled ? 'none' : `${agent.idle_timeout_seconds}s`],
    ['exit error', agent.exit_error],
  ]);
}

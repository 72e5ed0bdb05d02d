// The berth command: the program's tree of commands (commander), the global options, and the one place
// where failures become a message on stderr and an exit code.
import { Argument, Command, Option } from 'commander';
import { agentsCommand } from './commands/agents.js';
import { loginCommand, logoutCommand } from './commands/auth.js';
import { mcpCommand } from './commands/mcp.js';
import { imagesCommand } from './commands/images.js';
import { jobsCommand } from './commands/jobs.js';
import { runCommand } from './commands/run.js';
import { sessionsCommand } from './commands/sessions.js';
import { usageCommand } from './commands/usage.js';
import { diffCommand, pullCommand, pushCommand, workspacesCommand } from './commands/workspaces.js';
import { healthCommand, versionCommand } from './commands/system.js';
import { completionScript, SHELLS, type Shell } from './completion.js';
import { cliVersion, contextOf, DEFAULT_URL, parseUrl } from './context.js';
import { report } from './errors.js';
import { OUTPUT_FORMATS, styled } from './output.js';
import { visible } from './terminal-text.js';

export function buildProgram(): Command {
  const program = new Command('berth')
    .description('Run prompts, jobs and persistent agents on a Berth server.')
    .version(cliVersion(), '-V, --version', "show this command's version")
    .addOption(new Option('--url <url>', 'the Berth server').env('BERTH_URL').default(DEFAULT_URL).argParser(parseUrl))
    .addOption(new Option('-o, --output <format>', 'table for people, json for scripts').choices(OUTPUT_FORMATS).default('table'))
    .showHelpAfterError('(add --help for usage)');

  program.addCommand(runCommand(contextOf));
  program.addCommand(jobsCommand(contextOf));
  program.addCommand(sessionsCommand(contextOf));
  program.addCommand(pushCommand(contextOf));
  program.addCommand(pullCommand(contextOf));
  program.addCommand(diffCommand(contextOf));
  program.addCommand(workspacesCommand(contextOf));
  program.addCommand(agentsCommand(contextOf));
  program.addCommand(usageCommand(contextOf));
  program.addCommand(imagesCommand(contextOf));
  program.addCommand(mcpCommand(contextOf));
  program.addCommand(loginCommand(contextOf));
  program.addCommand(logoutCommand(contextOf));
  program.addCommand(healthCommand(contextOf));
  program.addCommand(versionCommand(contextOf));
  program.addCommand(
    new Command('completion')
      .description('print a shell completion script: source <(berth completion bash)')
      .addArgument(new Argument('<shell>', 'the shell').choices(SHELLS))
      .action((shell: Shell) => {
        process.stdout.write(completionScript(program, shell));
      }),
  );
  return program;
}

/** Runs the command line `argv` (process.argv form) and exits with its exit code. */
export async function main(argv: readonly string[]): Promise<never> {
  const program = buildProgram();
  try {
    await program.parseAsync(argv);
    process.exit(0);
  } catch (error) {
    const { message, hint, exitCode } = report(error, program.opts<{ url?: string }>().url ?? DEFAULT_URL);
    // The message often quotes the server (an error text, a job's error, an agent's exit error).
    if (message !== '') process.stderr.write(`${visible(message)}\n`);
    if (hint !== undefined) process.stderr.write(`${styled(process.stderr, 'dim', `hint: ${hint}`)}\n`);
    process.exit(exitCode);
  }
}

// berth usage: what the model gateway and the egress proxy recorded for the caller: by UTC day and by run
// (GET /usage), or one run's model requests and egress decisions (--run, GET /usage/runs/{id}).
import { Command, InvalidArgumentError } from 'commander';
import type { ContextOf } from '../context.js';
import { runUsageText, usageReportText } from '../usage-text.js';

/** commander parser for --from/--to: a UTC date as Berth takes it (it checks that the date exists). */
export function parseDate(value: string): string {
  if (!/^\d{4}-\d{2}-\d{2}$/.test(value)) throw new InvalidArgumentError('a UTC date, YYYY-MM-DD');
  return value;
}

interface UsageOptions {
  readonly from?: string;
  readonly to?: string;
  readonly run?: string;
}

export function usageCommand(contextOf: ContextOf): Command {
  return new Command('usage')
    .summary('show your model usage by day and by run, or one run\'s requests and egress decisions')
    .description(
      "Show what the model gateway recorded for you: requests, tokens and estimated cost per UTC day and per run, with your daily limits (default: the last 7 days). With --run, one run's model requests and the egress proxy's decisions (hosts reached or refused).",
    )
    .option('--from <date>', 'first UTC day, YYYY-MM-DD (default: 6 days before --to)', parseDate)
    .option('--to <date>', 'last UTC day, YYYY-MM-DD (default: today)', parseDate)
    .option('--run <run-id>', "one run's model requests and egress decisions (run-…)")
    .action(async (options: UsageOptions, command: Command) => {
      if (options.run !== undefined && (options.from !== undefined || options.to !== undefined)) command.error('error: --run shows a whole run; it takes no --from or --to');
      const { berth, output } = contextOf(command);
      if (options.run !== undefined) {
        const run = await berth.usage.run(options.run);
        return output.format === 'json' ? output.json(run) : output.line(runUsageText(run).trimEnd());
      }
      const report = await berth.usage.get({ ...(options.from !== undefined ? { from: options.from } : {}), ...(options.to !== undefined ? { to: options.to } : {}) });
      return output.format === 'json' ? output.json(report) : output.line(usageReportText(report).trimEnd());
    });
}

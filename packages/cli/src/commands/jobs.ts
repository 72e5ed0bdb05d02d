// berth jobs ls|get|wait|cancel: the async jobs of `berth run --async`.
import { Command, Option } from 'commander';
import type { Job } from '@berth/client';
import { parseCount, type Context, type ContextOf } from '../context.js';
import { CliError, Interrupted } from '../errors.js';
import { onInterrupt } from '../interrupt.js';
import { shortTime } from '../output.js';
import { Spinner } from '../spinner.js';

const STATUSES = ['pending', 'running', 'completed', 'failed', 'crashed', 'cancelled'];

export function jobsCommand(contextOf: ContextOf): Command {
  const jobs = new Command('jobs').summary('list, read, wait for and cancel async jobs').description('Async jobs, as queued by `berth run --async`.');

  jobs
    .command('ls')
    .description('list jobs, newest first')
    .addOption(new Option('--status <status>', 'only jobs in this status').choices(STATUSES))
    .option('--limit <n>', 'jobs per page, 1–500 (default 50)', parseCount)
    .option('--offset <n>', 'jobs skipped', parseCount)
    .action(async (options: { status?: Job['status']; limit?: number; offset?: number }, command: Command) => {
      const { berth, output } = contextOf(command);
      const list = await berth.jobs.list(options);
      output.list(list, list.jobs, [
        { header: 'ID', value: (job) => job.id },
        { header: 'STATUS', value: (job) => job.status },
        { header: 'CREATED', value: (job) => shortTime(job.created_at) },
      ], 'no jobs');
    });

  jobs
    .command('get')
    .description("show a job: status, output, and why it did not complete")
    .argument('<id>', 'job id (job-…)')
    .action(async (id: string, _options: unknown, command: Command) => {
      const context = contextOf(command);
      printJob(context, await context.berth.jobs.get(id));
    });

  jobs
    .command('wait')
    .description('wait until a job has ended, then show it (exit code 1 unless it completed)')
    .argument('<id>', 'job id (job-…)')
    .action(async (id: string, _options: unknown, command: Command) => {
      const context = contextOf(command);
      const job = await waitFor(context, id);
      printJob(context, job);
      if (job.status !== 'completed') throw new CliError(`job ${job.id} ${job.status}${job.error ? `: ${job.error}` : ''}`);
    });

  jobs
    .command('cancel')
    .description('cancel a pending or running job (its container is removed)')
    .argument('<id>', 'job id (job-…)')
    .action(async (id: string, _options: unknown, command: Command) => {
      const { berth, output } = contextOf(command);
      const answer = await berth.jobs.cancel(id);
      output.record(answer, [['id', id], ['status', 'cancelled']]);
    });

  return jobs;
}

async function waitFor(context: Context, id: string): Promise<Job> {
  const interrupt = onInterrupt();
  const spinner = new Spinner(`${id} …`);
  try {
    return await context.berth.waitForJob(id, {
      signal: interrupt.signal,
      onUpdate: (job) => spinner.update(`${id} ${job.status}`),
    });
  } catch (error) {
    if (interrupt.signal.aborted) throw new Interrupted(`stopped waiting; ${id} keeps running (cancel it with: berth jobs cancel ${id})`);
    throw error;
  } finally {
    spinner.stop();
    interrupt.dispose();
  }
}

function printJob({ output }: Context, job: Job): void {
  output.record(job, [
    ['id', job.id],
    ['status', job.status],
    ['session', job.session_id],
    ['created', shortTime(job.created_at)],
    ['finished', job.finished_at ? shortTime(job.finished_at) : undefined],
    ['error', job.error ?? undefined],
    ['crash', job.crash_info ? `${job.crash_info.reason} (exit code ${job.crash_info.exit_code}${job.crash_info.signal ? `, ${job.crash_info.signal}` : ''})` : undefined],
  ]);
  if (output.format === 'table' && job.output !== '') output.line(`\n${job.output.replace(/\n$/, '')}`);
}

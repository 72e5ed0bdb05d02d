// Workspaces from the command line: `berth push DIR` (a local directory into a workspace, honouring its
// .gitignore files), `berth pull ID DIR` (the workspace back into a new local directory, checked as
// hostile), `berth diff ID` (what the last run changed), and `berth workspaces ls|show|files|rm`.
// stdout carries only what a script wants (the workspace id, the diff); progress goes to stderr.
import { Command, Option } from 'commander';
import type { PackPlan, Workspace } from '@berth/client';
import type { Context, ContextOf } from '../context.js';
import { CliError, Interrupted } from '../errors.js';
import { onInterrupt } from '../interrupt.js';
import { humanBytes, shortTime, styled } from '../output.js';
import { Spinner } from '../spinner.js';
import { colouredDiff } from '../diff-text.js';

interface PushOptions {
  readonly workspace?: string;
  readonly path?: string;
  readonly includeGit?: boolean;
  readonly gitignore: boolean;
  readonly ignore?: string[];
}

export function pushCommand(contextOf: ContextOf): Command {
  return new Command('push')
    .summary('upload a local directory into a new workspace and print its id')
    .description(
      'Pack DIR as tar.gz (honouring its .gitignore files and .git/info/exclude; .git left out unless --include-git) and extract it into a new workspace, whose id is printed; --workspace uploads into an existing one.',
    )
    .argument('<dir>', 'the local directory')
    .option('--workspace <id>', 'upload into this workspace instead of creating one')
    .option('--path <subdir>', 'extract under this subdirectory of the workspace')
    .option('--include-git', 'also upload the .git directory')
    .option('--no-gitignore', 'do not honour .gitignore files')
    .option('--ignore <pattern>', 'leave out what matches this gitignore-style pattern (repeatable)', collect)
    .action(async (dir: string, options: PushOptions, command: Command) => push(contextOf(command), dir, options));
}

async function push(context: Context, dir: string, options: PushOptions): Promise<void> {
  const interrupt = onInterrupt();
  const spinner = new Spinner(`reading ${dir}`);
  let created: Workspace | undefined;
  let plan: PackPlan | undefined;
  try {
    if (options.workspace === undefined) created = await context.berth.workspaces.create({}, { signal: interrupt.signal });
    const id = options.workspace ?? created!.id;
    const result = await context.berth.workspaces.uploadDirectory(id, dir, {
      path: options.path,
      includeGit: options.includeGit === true,
      gitignore: options.gitignore,
      ignore: options.ignore,
      signal: interrupt.signal,
      onSkip: (path, reason) => note(`skipped ${path}: ${reason}`),
      onPlan: (walked) => {
        plan = walked;
        spinner.update(`uploading ${walked.files} files (${humanBytes(walked.bytes)})`);
      },
      onProgress: (sent) => spinner.update(`uploading ${plan?.files ?? 0} files (${humanBytes(plan?.bytes ?? 0)}): ${humanBytes(sent)} sent`),
    });
    spinner.stop();
    if (context.output.format === 'json') return context.output.json({ workspace_id: id, files: result.files, bytes: result.bytes });
    context.output.line(id);
    note(`${result.files} files (${humanBytes(result.bytes)}) in workspace ${id}`);
  } catch (error) {
    spinner.stop();
    // A workspace this command created and could not fill is removed: it would count against the caller's limit.
    if (created) await context.berth.workspaces.delete(created.id).catch(() => undefined);
    if (interrupt.signal.aborted) throw new Interrupted('cancelled: nothing was kept');
    throw error;
  } finally {
    interrupt.dispose();
  }
}

export function pullCommand(contextOf: ContextOf): Command {
  return new Command('pull')
    .summary("download a workspace's files into a new local directory")
    .description(
      "Download a workspace's tree (or --path's subtree) as tar.gz and unpack it into DIR, which must not exist or be empty. The archive is checked first: absolute paths, '..', links pointing outside, hard links, devices and setuid bits refuse it whole.",
    )
    .argument('<id>', 'workspace id')
    .argument('<dir>', 'the local directory to create')
    .option('--path <subdir>', 'only this subdirectory of the workspace')
    .action(async (id: string, dir: string, options: { path?: string }, command: Command) => {
      const context = contextOf(command);
      const interrupt = onInterrupt();
      const spinner = new Spinner(`downloading workspace ${id}`);
      try {
        const result = await context.berth.workspaces.downloadDirectory(id, dir, { path: options.path, signal: interrupt.signal });
        spinner.stop();
        if (context.output.format === 'json') return context.output.json({ workspace_id: id, dir, ...result });
        note(`${result.files} files (${humanBytes(result.bytes)}) in ${dir}`);
      } catch (error) {
        if (interrupt.signal.aborted) throw new Interrupted('cancelled: nothing was written');
        if (error instanceof Error && error.name === 'UnsafeArchiveError') throw new CliError(error.message);
        throw error;
      } finally {
        spinner.stop();
        interrupt.dispose();
      }
    });
}

export function diffCommand(contextOf: ContextOf): Command {
  return new Command('diff')
    .summary('show what changed in a workspace since the last run (or upload)')
    .description('Print the unified diff between a checkpoint and the workspace now; binary and too large files are listed. --output json prints the summary.')
    .argument('<id>', 'workspace id')
    .addOption(new Option('--since <checkpoint>', 'last_run: before the last run began; upload: after the last push or clone').choices(['last_run', 'upload']).default('last_run'))
    .action(async (id: string, options: { since: 'last_run' | 'upload' }, command: Command) => {
      const { berth, output } = contextOf(command);
      const diff = await berth.workspaces.diff(id, { since: options.since });
      if (output.format === 'json') return output.json(diff);
      process.stdout.write(colouredDiff(diff.diff, process.stdout));
      const listed: Array<[string, readonly string[]]> = [
        ['binary', diff.binary],
        ['too large to diff', diff.too_large],
      ];
      for (const [what, paths] of listed) for (const path of paths) note(`${what}: ${path}`);
      if (diff.added.length + diff.changed.length + diff.removed.length === 0) note(`no changes since ${options.since}`);
    });
}

export function workspacesCommand(contextOf: ContextOf): Command {
  const workspaces = new Command('workspaces')
    .summary('list, show, browse and delete workspaces')
    .description('Workspaces: file trees that runs mount at their workdir (berth push, berth run --workspace, berth pull).');

  workspaces
    .command('ls', { isDefault: true })
    .description('list your workspaces')
    .action(async (_options: unknown, command: Command) => {
      const { berth, output } = contextOf(command);
      const list = await berth.workspaces.list();
      output.list(list, list.workspaces, [
        { header: 'ID', value: (w) => w.id },
        { header: 'SIZE', value: (w) => humanBytes(w.size_bytes) },
        { header: 'FILES', value: (w) => String(w.file_count) },
        { header: 'SOURCE', value: (w) => w.source },
        { header: 'IN USE', value: (w) => (w.in_use ? 'yes' : 'no') },
        { header: 'LAST USED', value: (w) => shortTime(w.last_used_at) },
      ], 'no workspaces');
    });

  workspaces
    .command('show')
    .description('show one workspace: size, files, sessions using it')
    .argument('<id>', 'workspace id')
    .action(async (id: string, _options: unknown, command: Command) => {
      const { berth, output } = contextOf(command);
      const workspace: Workspace = await berth.workspaces.get(id);
      output.record(workspace, [
        ['id', workspace.id],
        ['source', workspace.source],
        ['size', `${humanBytes(workspace.size_bytes)} of ${humanBytes(workspace.max_bytes)}`],
        ['files', `${workspace.file_count} of ${workspace.max_files}`],
        ['in use', workspace.in_use ? 'yes' : 'no'],
        ['sessions', workspace.sessions.length > 0 ? workspace.sessions.join(', ') : 'none'],
        ['owned by session', workspace.owner_session ?? undefined],
        ['created', shortTime(workspace.created_at)],
        ['last used', shortTime(workspace.last_used_at)],
      ]);
    });

  workspaces
    .command('files')
    .description("list a directory of a workspace (default its root)")
    .argument('<id>', 'workspace id')
    .argument('[path]', 'a directory in the workspace', '')
    .action(async (id: string, path: string, _options: unknown, command: Command) => {
      const { berth, output } = contextOf(command);
      const listing = await berth.workspaces.files(id, path);
      output.list(listing, listing.entries, [
        { header: 'NAME', value: (e) => (e.type === 'directory' ? `${e.name}/` : e.name) },
        { header: 'TYPE', value: (e) => e.type },
        { header: 'SIZE', value: (e) => (e.type === 'file' ? humanBytes(e.size) : '') },
        { header: 'MODE', value: (e) => e.mode.toString(8).padStart(4, '0') },
        { header: 'MODIFIED', value: (e) => shortTime(e.mtime) },
      ], 'empty directory');
    });

  workspaces
    .command('rm')
    .description('delete a workspace and its files (refused while a run uses it)')
    .argument('<id>', 'workspace id')
    .action(async (id: string, _options: unknown, command: Command) => {
      const { berth, output } = contextOf(command);
      await berth.workspaces.delete(id);
      output.record({ deleted: id }, [['deleted', id]]);
    });

  return workspaces;
}

function collect(value: string, previous: string[] | undefined): string[] {
  return [...(previous ?? []), value];
}

/** A line for the person at the terminal, on stderr (stdout stays the command's answer). */
function note(text: string): void {
  process.stderr.write(`${styled(process.stderr, 'dim', text)}\n`);
}

// berth sessions ls|show|rm: stored conversations; `show` prints one as a transcript, page by page.
import { Command } from 'commander';
import type { ContextOf } from '../context.js';
import { TranscriptPrinter } from '../transcript.js';

export function sessionsCommand(contextOf: ContextOf): Command {
  const sessions = new Command('sessions').summary('list, show and delete sessions').description('Sessions: the stored conversations of runs, resumable with `berth run --resume <id>`.');

  sessions
    .command('ls')
    .description('list sessions, most recently active first')
    .action(async (_options: unknown, command: Command) => {
      const { berth, output } = contextOf(command);
      const list = await berth.sessions.list();
      output.list(list, list.sessions, [
        { header: 'ID', value: (session) => session.id },
        { header: 'TITLE', value: (session) => session.title },
      ], 'no sessions');
    });

  sessions
    .command('show')
    .description("print a session's transcript: who said what, tool calls and their results")
    .argument('<id>', 'session id')
    .action(async (id: string, _options: unknown, command: Command) => {
      const { berth, output } = contextOf(command);
      if (output.format === 'json') {
        const messages = [];
        for await (const message of berth.sessions.allMessages(id)) messages.push(message);
        return output.json({ session_id: id, messages });
      }
      // Printed as the pages arrive: a long session starts showing at once.
      const printer = new TranscriptPrinter(process.stdout);
      let empty = true;
      for await (const message of berth.sessions.allMessages(id)) {
        printer.message(message);
        empty = false;
      }
      if (empty) output.line('no messages');
    });

  sessions
    .command('rm')
    .description('delete a session and its files')
    .argument('<id>', 'session id')
    .action(async (id: string, _options: unknown, command: Command) => {
      const { berth, output } = contextOf(command);
      const answer = await berth.sessions.delete(id);
      output.record(answer, [['deleted', id]]);
    });

  return sessions;
}

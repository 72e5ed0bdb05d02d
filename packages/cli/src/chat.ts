// The interactive chat of `berth agents chat ID`: a prompt line (node:readline), each line sent as a turn,
// the agent's events shown as they arrive, the end of each turn marked. Ctrl-D (or the end of piped
// input, once the turns sent have ended) or Ctrl-C leaves; the agent keeps running unless the chat was
// opened with --rm.
import { createInterface, type Interface } from 'node:readline';
import { setTimeout as delay } from 'node:timers/promises';
import type { AgentEvent, Berth } from '@berth/client';
import type { Context } from './context.js';
import { CliError, Interrupted } from './errors.js';
import { onInterrupt } from './interrupt.js';
import { styled, type Sink } from './output.js';
import { Spinner } from './spinner.js';
import { visible } from './terminal-text.js';
import { renderEngineLine } from './transcript.js';

const PROMPT = 'you> ';

type Leaving = { reason: 'eof' | 'interrupt' } | { reason: 'exited'; why: string } | { reason: 'failed'; error: unknown };

export async function chat(context: Context, id: string, options: { rm?: boolean }): Promise<void> {
  const { berth } = context;
  const out = process.stdout;
  const following = new AbortController();
  await untilReady(berth, id);

  let leave!: (leaving: Leaving) => void;
  const left = new Promise<Leaving>((resolve) => (leave = resolve));
  // A first connection gets live events only, so no line is sent before the stream is open (Berth
  // subscribes before it answers): piped input would otherwise send its first turn before the subscription,
  // and its output would never be shown. Once open, a dropped stream is reconnected with Last-Event-ID
  // (@berth/client), so nothing sent while it was down is missed.
  let connected!: () => void;
  const open = new Promise<void>((resolve) => (connected = resolve));
  const events = berth.agents.events(id, { signal: following.signal, onConnect: () => connected() });
  let conversation: Conversation | undefined;
  (async () => {
    for await (const event of events) conversation?.event(event);
    leave({ reason: 'exited', why: 'its event stream ended' });
  })().catch((error: unknown) => leave(following.signal.aborted ? { reason: 'eof' } : { reason: 'failed', error }));
  const stoppedEarly = await Promise.race([open.then(() => undefined), left]);
  if (stoppedEarly !== undefined) {
    following.abort();
    if (stoppedEarly.reason === 'failed') throw stoppedEarly.error;
    throw new CliError(`agent ${id} has exited: ${stoppedEarly.reason === 'exited' ? stoppedEarly.why : 'its event stream ended'}`);
  }

  const interactive = Boolean(process.stdin.isTTY);
  const rl = createInterface({ input: process.stdin, output: out, prompt: PROMPT, terminal: interactive });
  conversation = new Conversation(berth, id, rl, out, interactive, leave);
  const talking = conversation;
  rl.on('line', (line) => talking.input(line));
  rl.on('close', () => talking.endOfInput());
  // A terminal's Ctrl-C reaches readline as a key; piped input leaves the signal to the process.
  const interrupted = () => leave({ reason: 'interrupt' });
  rl.on('SIGINT', interrupted);
  process.on('SIGINT', interrupted);

  out.write(styled(out, 'dim', `chatting with ${id}; Ctrl-D leaves${options.rm ? ' and removes the agent' : ' (the agent keeps running)'}`) + '\n');
  if (interactive) rl.prompt();
  const leaving = await left;
  following.abort();
  process.off('SIGINT', interrupted);
  rl.removeAllListeners('close');
  rl.close();
  if (interactive) out.write('\n');

  if (leaving.reason === 'failed') throw leaving.error;
  if (leaving.reason === 'exited') throw new CliError(`agent ${id} has exited: ${leaving.why}`);
  if (options.rm) {
    await berth.agents.delete(id);
    out.write(`agent ${visible(id)} removed\n`);
  } else {
    out.write(styled(out, 'dim', `left the chat; ${id} keeps running (stop it with: berth agents rm ${id})`) + '\n');
  }
  if (leaving.reason === 'interrupt') throw new Interrupted('');
}

/** Turns one at a time: lines entered while a turn runs wait for it; the input's end waits for them all. */
class Conversation {
  /** The turn in progress: its id once send has answered, and whether the engine printed its result line. */
  private turn: { id?: string; resultSeen: boolean } | undefined;
  private readonly waiting: string[] = [];
  private inputEnded = false;

  constructor(
    private readonly berth: Berth,
    private readonly id: string,
    private readonly rl: Interface,
    private readonly out: Sink,
    private readonly interactive: boolean,
    private readonly leave: (leaving: Leaving) => void,
  ) {}

  input(line: string): void {
    const prompt = line.trim();
    // Typed at a visible prompt, the line is on screen already; otherwise it is shown when it is sent.
    const shown = this.interactive && this.turn === undefined && this.waiting.length === 0;
    if (prompt === '') return void (shown && this.rl.prompt());
    this.waiting.push(prompt);
    if (this.turn === undefined) this.next(shown);
  }

  endOfInput(): void {
    this.inputEnded = true;
    if (this.turn === undefined && this.waiting.length === 0) this.leave({ reason: 'eof' });
  }

  event(event: AgentEvent): void {
    // Until send has answered, the turn's id is not known, but its first events may already be here.
    const ours = this.turn !== undefined && (this.turn.id === undefined || event.turn_id === this.turn.id);
    if (event.type === 'output' && event.content !== undefined) {
      this.out.write(renderEngineLine(this.out, event.content));
      if (ours && isResultLine(event.content)) this.turn!.resultSeen = true;
    } else if (event.type === 'turn_end') {
      if (ours) this.ended('── turn ended ──');
    } else if (event.type === 'error') {
      this.out.write(`${styled(this.out, 'red', event.content ?? 'error')}\n`);
      // The engine's stderr lines are errors too; a failed turn's error comes after its result line.
      if (ours && this.turn!.resultSeen) this.ended('── turn failed ──');
    } else if (event.type === 'events_lost') {
      this.out.write(`${styled(this.out, 'dim', '── some events were sent while the stream was down and are no longer kept by Berth ──')}\n`);
    } else if (event.type === 'exited') {
      this.leave({ reason: 'exited', why: event.content ?? 'no reason given' });
    }
  }

  private ended(mark: string): void {
    this.out.write(`${styled(this.out, 'dim', mark)}\n`);
    this.turn = undefined;
    this.next(false);
  }

  /** Sends the next waiting line, or shows the prompt (or leaves, once the input has ended). */
  private next(shown: boolean): void {
    const prompt = this.waiting.shift();
    if (prompt === undefined) {
      if (this.inputEnded) this.leave({ reason: 'eof' });
      else if (this.interactive) this.rl.prompt();
      return;
    }
    if (!shown) this.out.write(`${PROMPT}${visible(prompt)}\n`);
    const turn: { id?: string; resultSeen: boolean } = { resultSeen: false };
    this.turn = turn;
    this.berth.agents.send(this.id, prompt).then(
      (sent) => {
        turn.id = sent.turn_id;
      },
      (error: unknown) => {
        this.out.write(`${styled(this.out, 'red', `not sent: ${error instanceof Error ? error.message : String(error)}`)}\n`);
        this.turn = undefined;
        this.next(false);
      },
    );
  }
}

/** Waits while the agent is starting (a spinner on a terminal); refuses one that has exited. */
async function untilReady(berth: Berth, id: string): Promise<void> {
  const interrupt = onInterrupt();
  const spinner = new Spinner(`${id} is starting`);
  try {
    for (;;) {
      const agent = await berth.agents.get(id, { signal: interrupt.signal });
      if (agent.status === 'exited') throw new CliError(`agent ${id} has exited (${agent.exit_error ?? 'no reason given'})`, 1, 'spawn a new one with: berth agents spawn');
      if (agent.status !== 'starting') return;
      await delay(250, undefined, { signal: interrupt.signal });
    }
  } catch (error) {
    throw interrupt.signal.aborted ? new Interrupted('') : error;
  } finally {
    spinner.stop();
    interrupt.dispose();
  }
}

function isResultLine(content: string): boolean {
  try {
    return (JSON.parse(content) as { type?: unknown }).type === 'result';
  } catch {
    return false;
  }
}

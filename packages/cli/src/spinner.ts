// A one-line progress indicator on stderr for operations that have no percentage to show (a run being
// set up, a job being waited for): a spinner, a text that can change, and the elapsed time. Nothing is
// drawn when stderr is not a terminal, so logs and pipes stay clean.

import { visible } from './terminal-text.js';

const FRAMES = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

export class Spinner {
  private timer: NodeJS.Timeout | undefined;
  private frame = 0;
  private readonly started = Date.now();

  constructor(
    private text: string,
    private readonly stream: NodeJS.WriteStream = process.stderr,
  ) {
    if (!stream.isTTY) return;
    this.timer = setInterval(() => this.draw(), 100);
    this.draw();
  }

  update(text: string): void {
    this.text = text;
    this.draw();
  }

  /** Seconds since the spinner started, e.g. "12s" or "2m05s". */
  elapsed(): string {
    const seconds = Math.floor((Date.now() - this.started) / 1000);
    return seconds < 60 ? `${seconds}s` : `${Math.floor(seconds / 60)}m${String(seconds % 60).padStart(2, '0')}s`;
  }

  /** Erases the line; what follows is printed where the spinner was. */
  stop(): void {
    if (this.timer === undefined) return;
    clearInterval(this.timer);
    this.timer = undefined;
    this.stream.write('\r\x1b[2K');
  }

  private draw(): void {
    if (this.timer === undefined) return;
    this.frame = (this.frame + 1) % FRAMES.length;
    this.stream.write(`\r\x1b[2K${FRAMES[this.frame]} ${visible(this.text)} (${this.elapsed()})`);
  }
}

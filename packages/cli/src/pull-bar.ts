// The progress of `berth images pull` on stderr. On a terminal: Podman's lines ("Copying blob sha256:…")
// printed above a cli-progress bar with a count of blobs. Podman says when a blob's copy starts but not
// when it ends, nor how many there will be, so the bar cannot show a fraction while blobs are copied: it
// pulses, the count says how many blobs have started, and both fill once every blob is copied. Elsewhere
// (a pipe, a log) the lines alone, one each, with nothing redrawn.
import { MultiBar, type Options, type SingleBar } from 'cli-progress';
import type { PullProgress } from '@berth/client';
import { visible } from './terminal-text.js';

const WIDTH = 30;
const PULSE = 6;

type Step = Extract<PullProgress, { phase: 'progress' }>;

export class PullBar {
  private readonly started = Date.now();
  private readonly bars: MultiBar | undefined;
  private readonly bar: SingleBar | undefined;
  private copied = false;

  constructor(
    image: string,
    private readonly stream: NodeJS.WriteStream = process.stderr,
  ) {
    if (!stream.isTTY) return;
    const options: Options = {
      format: `pulling ${visible(image)} [{bar}] {blobs} {duration_formatted}`,
      barsize: WIDTH,
      formatBar: (progress) => (progress >= 1 || this.copied ? '='.repeat(WIDTH) : this.pulse()),
      hideCursor: true,
      clearOnComplete: false,
      // Logging a line clears the bar's line, and cli-progress redraws a bar only when its text changed: a
      // pull whose last lines came after the bar was already full (within the same second) left a blank
      // line where the full bar belonged. Redrawn on every frame, the bar is always back below the lines.
      forceRedraw: true,
      stream,
    };
    this.bars = new MultiBar(options);
    this.bar = this.bars.create(1, 0, { blobs: blobCount(0) });
  }

  /** One line of the pull's progress: printed (above the bar on a terminal), and the count updated. */
  progress(step: Step): void {
    if (!this.bars) {
      this.stream.write(`${visible(step.message)}\n`);
      return;
    }
    this.bars.log(`${visible(step.message)}\n`);
    this.copied = step.blobs_done !== undefined;
    this.bar!.update(0, { blobs: blobCount(step.blobs_started, step.blobs_done) });
  }

  /** Fills the bar and leaves it on screen. */
  done(): void {
    if (!this.bars) return;
    this.bar!.update(1);
    this.bars.update(); // prints the lines logged since the last redraw: stop() does not
    this.bars.stop();
  }

  /** Removes the bar (a failed or cancelled pull); the lines printed stay. */
  abandon(): void {
    if (!this.bars) return;
    this.bars.update();
    this.bars.stop();
    this.stream.write('\x1b[1A\r\x1b[2K');
  }

  /** A block going back and forth, so a pull that takes long still shows that it is alive. */
  private pulse(): string {
    const span = WIDTH - PULSE;
    const step = Math.floor((Date.now() - this.started) / 80) % (2 * span);
    const at = step <= span ? step : 2 * span - step;
    return ' '.repeat(at) + '='.repeat(PULSE) + ' '.repeat(span - at);
  }
}

/** "0 blobs", "3 blobs started", "3/3 blobs copied". */
export function blobCount(started: number, done?: number): string {
  if (done !== undefined) return `${done}/${started} ${started === 1 ? 'blob' : 'blobs'} copied`;
  if (started === 0) return '0 blobs';
  return `${started} ${started === 1 ? 'blob' : 'blobs'} started`;
}

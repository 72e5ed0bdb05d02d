// The progress bar of `berth images pull` (cli-progress, on stderr, drawn only on a terminal). Berth
// answers a pull once the image is there and reports nothing in between, so the bar cannot show a
// fraction: it pulses while the pull runs, shows the time spent, and fills when the image has arrived.
import { SingleBar, type Options } from 'cli-progress';

const WIDTH = 30;
const PULSE = 6;

export class PullBar {
  private readonly bar: SingleBar;
  private readonly started = Date.now();

  constructor(image: string) {
    const options: Options = {
      format: `pulling ${image} [{bar}] {duration_formatted}`,
      barsize: WIDTH,
      formatBar: (progress) => (progress >= 1 ? '='.repeat(WIDTH) : this.pulse()),
      hideCursor: true,
      clearOnComplete: false,
      stream: process.stderr,
    };
    this.bar = new SingleBar(options);
    this.bar.start(1, 0);
  }

  /** Fills the bar and leaves it on screen. */
  done(): void {
    this.bar.update(1);
    this.bar.stop();
  }

  /** Removes the bar (a failed or cancelled pull). */
  abandon(): void {
    this.bar.stop();
    if (process.stderr.isTTY) process.stderr.write('\x1b[1A\r\x1b[2K');
  }

  /** A block going back and forth, so a pull that takes long still shows that it is alive. */
  private pulse(): string {
    const span = WIDTH - PULSE;
    const step = Math.floor((Date.now() - this.started) / 80) % (2 * span);
    const at = step <= span ? step : 2 * span - step;
    return ' '.repeat(at) + '='.repeat(PULSE) + ' '.repeat(span - at);
  }
}

// The engine's output lines kept for the caller (stream-json output, crash reports' partial_output),
// bounded: past the budget the oldest lines go, so a run that prints gigabytes cannot exhaust Berth.
export class OutputTail {
  private readonly lines: string[] = [];
  private chars = 0;
  private first = 0;
  truncated = false;

  constructor(private readonly maxChars = 32 * 1024 * 1024) {}

  push(line: string): void {
    this.lines.push(line);
    this.chars += line.length + 1;
    while (this.chars > this.maxChars && this.first < this.lines.length - 1) {
      this.chars -= this.lines[this.first]!.length + 1;
      this.lines[this.first] = '';
      this.first++;
      this.truncated = true;
    }
    // Compact now and then so dropped lines do not keep their slots.
    if (this.first > 1024 && this.first > this.lines.length / 2) {
      this.lines.splice(0, this.first);
      this.first = 0;
    }
  }

  get count(): number {
    return this.lines.length - this.first;
  }

  text(): string {
    return this.count === 0 ? '' : `${this.lines.slice(this.first).join('\n')}\n`;
  }
}

// A unified diff for the terminal. Its text is what code in a container wrote, so every line goes through
// terminal-text.ts (control characters shown, never obeyed) before the CLI adds its own colours, and only
// on a terminal with NO_COLOR unset: added lines green, removed red, hunk headers cyan, file headers bold.
import type { Sink } from './output.js';
import { visible } from './terminal-text.js';

const STYLES: ReadonlyArray<readonly [test: (line: string) => boolean, open: string]> = [
  [(line) => line.startsWith('+++ ') || line.startsWith('--- ') || line.startsWith('diff ') || line.startsWith('Binary files '), '\x1b[1m'],
  [(line) => line.startsWith('@@'), '\x1b[36m'],
  [(line) => line.startsWith('+'), '\x1b[32m'],
  [(line) => line.startsWith('-'), '\x1b[31m'],
];

/** `diff` made safe to print on `stream`, coloured when `stream` is a terminal (see above). */
export function colouredDiff(diff: string, stream: Sink, env: NodeJS.ProcessEnv = process.env): string {
  const shown = visible(diff);
  if (!stream.isTTY || env.NO_COLOR) return shown;
  return shown
    .split('\n')
    .map((line) => {
      const style = STYLES.find(([test]) => test(line));
      return style ? `${style[1]}${line}\x1b[0m` : line;
    })
    .join('\n');
}

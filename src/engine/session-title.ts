// Session titles. The engine records a title (a `custom-title` transcript record) when a
// UserPromptSubmit hook answers with `hookSpecificOutput.sessionTitle`. The hook runs inside the agent
// container, where only /bin/sh is guaranteed: parsing the hook's JSON input there would need jq or a
// hand-written JSON reader in shell. So Berth derives the title from the prompt here, uploads the hook's
// answer as an input file, and the hook only prints that file with shell builtins (`read`, `printf`).
// The engine itself then writes the title record, exactly as it would for any other hook.
import { INPUT_DIR } from './layout.js';

export const TITLE_MAX_CHARS = 60;
export const TITLE_FILE_NAME = 'session-title.json';

/** The engine's flag settings (`--settings`) that install the title hook. Constant: no user text in argv. */
export const TITLE_HOOK_SETTINGS = JSON.stringify({
  hooks: {
    UserPromptSubmit: [
      { hooks: [{ type: 'command', command: `read -r line < ${INPUT_DIR}/${TITLE_FILE_NAME}; printf '%s\\n' "$line"`, timeout: 10 }] },
    ],
  },
});

/**
 * A short title from a prompt: its first line that has any text, control characters removed,
 * whitespace collapsed, cut at a word boundary to at most TITLE_MAX_CHARS characters (code points)
 * with an ellipsis. Undefined when the prompt has no text at all.
 */
export function deriveSessionTitle(prompt: string): string | undefined {
  const line = prompt
    .split(/\r?\n|\r/)
    .map((candidate) => candidate.replace(/[\p{Cc}\p{Cf}]/gu, ' ').replace(/\s+/gu, ' ').trim())
    .find((candidate) => candidate !== '');
  if (line === undefined) return undefined;
  const chars = [...line];
  if (chars.length <= TITLE_MAX_CHARS) return line;
  const cut = chars.slice(0, TITLE_MAX_CHARS - 1).join('');
  const space = cut.lastIndexOf(' ');
  // Cut at the last word boundary unless that throws away most of the line (one long word).
  const head = space >= TITLE_MAX_CHARS / 2 ? cut.slice(0, space) : cut;
  return `${head.trimEnd()}…`;
}

/** What the hook prints: one line, so the shell's `read` takes it whole. */
export function titleHookOutput(title: string): string {
  return `${JSON.stringify({ hookSpecificOutput: { hookEventName: 'UserPromptSubmit', sessionTitle: title } })}\n`;
}

// Text the server sends (engine output, tool results, error texts, image names, pull progress…) comes from
// code in a container and from a model: printed as it is, an escape sequence in it would act on the
// operator's terminal (OSC 52 writes the clipboard, OSC 8 plants links, CSI moves the cursor or repaints,
// a bare CR overwrites the line before it). Everything the CLI prints from the server goes through here.
// Newline and tab stay; every other control character is shown instead of obeyed:
//   C0 (U+0000–U+001F) in caret notation, as `cat -v` and `less` show them: ESC → ^[, BEL → ^G, CR → ^M;
//   DEL (U+007F) → ^?;
//   C1 (U+0080–U+009F, e.g. the one-character CSI U+009B) → \u009b.
// A CR directly before a newline (a Windows line end) is dropped instead: it would move nothing.

const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g;
const C1_AND_DEL = /[\u007f-\u009f]/g;

/** `text` with every control character but newline and tab made visible (see above). */
export function visible(text: string): string {
  return text.replace(/\r+\n/g, '\n').replace(CONTROL, show);
}

/**
 * `value` as indented JSON that is safe on a terminal and still means the same: JSON.stringify escapes C0
 * itself but leaves DEL and C1 raw, so those become \u escapes too (valid JSON, the same string when parsed).
 */
export function terminalJson(value: unknown): string {
  return (JSON.stringify(value, null, 2) ?? 'null').replace(C1_AND_DEL, unicodeEscape);
}

function show(character: string): string {
  const code = character.charCodeAt(0);
  if (code < 0x20) return `^${String.fromCharCode(code + 0x40)}`;
  if (code === 0x7f) return '^?';
  return unicodeEscape(character);
}

function unicodeEscape(character: string): string {
  return `\\u${character.charCodeAt(0).toString(16).padStart(4, '0')}`;
}

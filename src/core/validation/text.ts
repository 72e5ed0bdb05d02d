// Rules for the free text of a run request: the prompts, tool names, model, session id and webhook URL.
// Every rule throws a BerthError naming the field; nothing here touches the file system or Podman.
import { errors } from '../../errors.js';
import { UUID_PATTERN } from '../../uuid.js';

/**
 * Characters refused in every text field: C0 controls except tab (U+0009), line feed (U+000A) and
 * carriage return (U+000D), plus DEL (U+007F) and the C1 controls (U+0080–U+009F). NUL is among them.
 */
const CONTROL_CHARACTER = /[\u0000-\u0008\u000B\u000C\u000E-\u001F\u007F-\u009F]/;
/** The same set without the tab, line feed and carriage return exception: for single-line values. */
const ANY_CONTROL_CHARACTER = /[\u0000-\u001F\u007F-\u009F]/;
/** A UTF-16 surrogate without its partner: such a string has no UTF-8 encoding. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** `^[A-Za-z0-9._:\-\[\]/@]+$`, at most 200 characters, not starting with `-` (it would read as a flag). */
const MODEL = /^[A-Za-z0-9._:[\]/@][A-Za-z0-9._:\-[\]/@]*$/;
export const MODEL_MAX_LENGTH = 200;

/**
 * Tool names and permission rules such as `Bash(git:*)`, `Read(~/src/**)`, `mcp__github__get_issue`,
 * `WebFetch(domain:example.com)`: letters, digits and `_ . : * ( ) - , / ~ @ = +` and space. The first
 * character is a letter or `_`, so a tool name can never be read as a command-line flag.
 */
const TOOL_NAME = /^[A-Za-z_][A-Za-z0-9_.:*()\-,/~@=+ ]*$/;
export const TOOL_NAME_MAX_LENGTH = 512;

export const WEBHOOK_URL_MAX_LENGTH = 2048;

export function describeCharacter(char: string): string {
  return `U+${char.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}`;
}

export function hasLoneSurrogate(value: string): boolean {
  return LONE_SURROGATE.test(value);
}

/** The first control character of `value` (refused set: see CONTROL_CHARACTER), or undefined. */
export function findControlCharacter(value: string, allowLineBreaks = true): string | undefined {
  const match = (allowLineBreaks ? CONTROL_CHARACTER : ANY_CONTROL_CHARACTER).exec(value);
  return match?.[0];
}

/** Valid UTF-8 and no refused control character; `allowLineBreaks` keeps tab, LF and CR allowed. */
export function checkCharacters(value: string, field: string, allowLineBreaks = true): void {
  if (hasLoneSurrogate(value)) {
    throw errors.invalid(`${field}: is not valid UTF-8 (it contains an unpaired UTF-16 surrogate)`);
  }
  const control = findControlCharacter(value, allowLineBreaks);
  if (control !== undefined) {
    const allowed = allowLineBreaks ? '; only tab, newline and carriage return are allowed' : '';
    throw errors.invalid(`${field}: contains the control character ${describeCharacter(control)}${allowed}`);
  }
}

/** Size limit in UTF-8 bytes; over it is a 413, because the request is well-formed but too large. */
export function checkSize(value: string, field: string, maxBytes: number): void {
  const bytes = Buffer.byteLength(value, 'utf8');
  if (bytes > maxBytes) {
    throw errors.tooLarge(`${field}: is ${bytes} bytes of UTF-8, over the limit of ${maxBytes} bytes (SERVICE_MAX_PROMPT_BYTES)`);
  }
}

/** The prompt: required, not only whitespace, at most maxBytes of UTF-8, valid characters. */
export function checkPrompt(prompt: string | undefined, maxBytes: number): string {
  if (prompt === undefined || prompt.trim() === '') throw errors.invalid('prompt: is required and must not be empty');
  checkSize(prompt, 'prompt', maxBytes);
  checkCharacters(prompt, 'prompt');
  return prompt;
}

/** system_prompt and append_system_prompt: optional, same limits as the prompt (each on its own). */
export function checkOptionalText(value: string | undefined, field: string, maxBytes: number): string | undefined {
  if (value === undefined) return undefined;
  checkSize(value, field, maxBytes);
  checkCharacters(value, field);
  return value;
}

export function checkToolNames(names: readonly string[] | undefined, field: string): string[] | undefined {
  if (names === undefined) return undefined;
  return names.map((name, index) => {
    const at = `${field}[${index}]`;
    checkCharacters(name, at, false);
    if (name.length > TOOL_NAME_MAX_LENGTH) throw errors.invalid(`${at}: is longer than ${TOOL_NAME_MAX_LENGTH} characters`);
    if (!TOOL_NAME.test(name)) {
      throw errors.invalid(
        `${at}: "${name}" is not a tool name: it must start with a letter or _ and contain only letters, digits, spaces and _ . : * ( ) - , / ~ @ = +`,
      );
    }
    return name;
  });
}

export function checkModel(model: string | undefined): string | undefined {
  if (model === undefined) return undefined;
  checkCharacters(model, 'engine.model', false);
  if (model.length === 0 || model.length > MODEL_MAX_LENGTH) {
    throw errors.invalid(`engine.model: must be 1 to ${MODEL_MAX_LENGTH} characters long`);
  }
  if (!MODEL.test(model)) {
    throw errors.invalid(`engine.model: "${model}" may contain only letters, digits and . _ : - [ ] / @, and must not start with -`);
  }
  return model;
}

/** A session id; returned in lowercase, the form under which the engine stores session files. */
export function checkSessionId(sessionId: string | undefined): string | undefined {
  if (sessionId === undefined) return undefined;
  checkCharacters(sessionId, 'engine.session_id', false);
  if (!UUID_PATTERN.test(sessionId)) {
    throw errors.invalid(`engine.session_id: "${sessionId}" is not a UUID (xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx, hexadecimal)`);
  }
  return sessionId.toLowerCase();
}

/** http or https, parseable, no user:password, no whitespace or control characters, at most 2048 characters. */
export function checkWebhookUrl(url: string | undefined): string | undefined {
  if (url === undefined) return undefined;
  const field = 'webhook_url';
  if (url.length > WEBHOOK_URL_MAX_LENGTH) throw errors.invalid(`${field}: is longer than ${WEBHOOK_URL_MAX_LENGTH} characters`);
  checkCharacters(url, field, false);
  // The URL parser silently drops tabs and newlines and trims spaces; refuse them instead.
  if (/\s/.test(url)) throw errors.invalid(`${field}: must not contain whitespace`);
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw errors.invalid(`${field}: "${url}" is not a valid absolute URL`);
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    throw errors.invalid(`${field}: scheme "${parsed.protocol.slice(0, -1)}" is not allowed; use http or https`);
  }
  if (parsed.username !== '' || parsed.password !== '') {
    throw errors.invalid(`${field}: must not contain a user name or password; the webhook is authenticated by its signature`);
  }
  if (parsed.hostname === '') throw errors.invalid(`${field}: has no host`);
  return url;
}

export const HOOK_COMMAND_MAX_BYTES = 4096;
export const HOOK_COMMANDS_MAX = 64;

/** One lifecycle list: at most 64 commands, each non-empty, at most 4096 bytes, with no control character at all. */
export function checkHookCommands(commands: readonly string[] | undefined, field: string): string[] {
  if (commands === undefined) return [];
  if (commands.length > HOOK_COMMANDS_MAX) throw errors.invalid(`${field}: has ${commands.length} commands; at most ${HOOK_COMMANDS_MAX} are allowed`);
  return commands.map((command, index) => {
    const at = `${field}[${index}]`;
    if (command.trim() === '') throw errors.invalid(`${at}: is empty`);
    if (Buffer.byteLength(command, 'utf8') > HOOK_COMMAND_MAX_BYTES) throw errors.invalid(`${at}: is longer than ${HOOK_COMMAND_MAX_BYTES} bytes`);
    checkCharacters(command, at, false);
    return command;
  });
}

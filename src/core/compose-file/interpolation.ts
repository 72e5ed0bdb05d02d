// Variable interpolation in a compose file, as the Compose Specification defines it: `$VAR`, `${VAR}`,
// `${VAR:-default}` / `${VAR-default}` (default when unset or empty / when unset), `${VAR:?message}` /
// `${VAR?message}` (error), `${VAR:+replacement}` / `${VAR+replacement}`, nested expressions inside a
// default or replacement, and `$$` for a literal `$`. Values are interpolated, keys are not.
//
// The variables are those of the `.env` file beside the compose file only, never Berth's own process
// environment: that holds Berth's secrets (the JWT secret, the webhook signing secret), which a compose
// file could otherwise copy into a container's environment.

export class InterpolationError extends Error {
  constructor(
    /** Where in the document, e.g. services.db.environment.PASSWORD. */
    readonly at: string,
    detail: string,
  ) {
    super(`${at}: ${detail}`);
    this.name = 'InterpolationError';
  }
}

export type Variables = ReadonlyMap<string, string>;

const NAME = /^[A-Za-z_][A-Za-z0-9_]*/;

/** Interpolates every string value of a parsed YAML document (recursively); keys stay as written. */
export function interpolateDocument(value: unknown, variables: Variables, at = ''): unknown {
  if (typeof value === 'string') return interpolate(value, variables, at || '(document)');
  if (Array.isArray(value)) return value.map((item, index) => interpolateDocument(item, variables, `${at}[${index}]`));
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(
      Object.entries(value).map(([key, item]) => [key, interpolateDocument(item, variables, at === '' ? key : `${at}.${key}`)]),
    );
  }
  return value;
}

/** One string interpolated. */
export function interpolate(text: string, variables: Variables, at: string): string {
  const { result, end } = scan(text, 0, variables, at, false);
  if (end !== text.length) throw new InterpolationError(at, `unexpected "}" at position ${end + 1}`);
  return result;
}

/**
 * Reads from `start` until the end of the text, or (inside a braced expression) until its closing `}`:
 * `end` is then the index of that brace.
 */
function scan(text: string, start: number, variables: Variables, at: string, nested: boolean): { result: string; end: number } {
  let result = '';
  let index = start;
  while (index < text.length) {
    const char = text[index]!;
    if (nested && char === '}') return { result, end: index };
    if (char !== '$') {
      result += char;
      index += 1;
      continue;
    }
    const next = text[index + 1];
    if (next === '$') {
      result += '$';
      index += 2;
    } else if (next === '{') {
      const expression = braced(text, index + 2, variables, at);
      result += expression.value;
      index = expression.end + 1;
    } else {
      const name = NAME.exec(text.slice(index + 1))?.[0];
      if (name === undefined) {
        // A lone `$` followed by something that starts no name: kept, as Compose does.
        result += '$';
        index += 1;
      } else {
        result += variables.get(name) ?? '';
        index += 1 + name.length;
      }
    }
  }
  if (nested) throw new InterpolationError(at, `"\${" at position ${start - 1} has no closing "}"`);
  return { result, end: index };
}

/** `${…}` starting after the brace: the value and the index of its closing brace. */
function braced(text: string, start: number, variables: Variables, at: string): { value: string; end: number } {
  const name = NAME.exec(text.slice(start))?.[0];
  if (name === undefined) throw new InterpolationError(at, `invalid interpolation format at position ${start - 1}: a variable name must follow "\${"`);
  let index = start + name.length;
  const value = variables.get(name);
  if (index >= text.length) throw new InterpolationError(at, `"\${" at position ${start - 1} has no closing "}"`);
  if (text[index] === '}') return { value: value ?? '', end: index };
  const colon = text[index] === ':';
  if (colon) index += 1;
  const operator = text[index];
  if (operator !== '-' && operator !== '?' && operator !== '+') {
    throw new InterpolationError(at, `invalid interpolation format for "\${${name}…}": expected "}", ":-", "-", ":?", "?", ":+" or "+"`);
  }
  const inner = scan(text, index + 1, variables, at, true);
  const unset = value === undefined || (colon && value === '');
  switch (operator) {
    case '-':
      return { value: unset ? inner.result : value!, end: inner.end };
    case '+':
      return { value: unset ? '' : inner.result, end: inner.end };
    case '?':
      if (unset) throw new InterpolationError(at, `required variable ${name} is ${value === undefined ? 'missing' : 'empty'}${inner.result ? `: ${inner.result}` : ''}`);
      return { value: value!, end: inner.end };
  }
}

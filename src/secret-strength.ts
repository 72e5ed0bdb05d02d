// Whether a configured secret (SERVICE_JWT_SECRET, an API token) is guessable. Length alone is not enough:
// `secretsecretsecretsecretsecretse` and `0123456789abcdef0123456789abcdef` are long and worthless. A value
// is refused when it is short, a placeholder, made of few distinct characters, a repetition of a shorter
// string, mostly a run of neighbouring characters, or carries too little estimated entropy.

export interface StrengthRule {
  readonly minLength: number;
  /** Shannon entropy of the value's characters times its length, in bits. */
  readonly minBits: number;
}

export const JWT_SECRET_RULE: StrengthRule = { minLength: 32, minBits: 120 };
export const API_TOKEN_RULE: StrengthRule = { minLength: 16, minBits: 64 };

// Placeholders people paste from examples.
const PLACEHOLDERS = [
  'changeme', 'change-me', 'change_me', 'secret', 'your-secret-key', 'your_secret_key', 'yoursecretkey',
  'your-256-bit-secret', 'jwt-secret', 'jwt_secret', 'supersecret', 'super-secret', 'password', 'default',
  'example', 'test', 'development', 'please-change-me', 'replace-me', 'mysecret', 'my-secret', 'token', 'apikey',
].map((word) => word.replace(/[^a-z0-9]/g, ''));

const ADVICE = 'generate a random one (for example: openssl rand -hex 32)';

/** Why the value is weak, or undefined when it is acceptable. */
export function secretWeakness(value: string, rule: StrengthRule): string | undefined {
  if (value === '') return `is empty; ${ADVICE}`;
  const chars = [...value];
  if (chars.length < rule.minLength) return `is ${chars.length} characters long; at least ${rule.minLength} are required; ${ADVICE}`;
  const compact = value.toLowerCase().replace(/[^a-z0-9]/g, '');
  if (PLACEHOLDERS.some((word) => compact === word.repeat(Math.max(1, Math.round(compact.length / word.length))) || (word.length >= 8 && compact.includes(word)))) {
    return `is a known placeholder; ${ADVICE}`;
  }
  if (new Set(chars).size < 8) return `uses only ${new Set(chars).size} distinct characters; ${ADVICE}`;
  if (periodOf(chars) < chars.length / 2) return `repeats a shorter string; ${ADVICE}`;
  if (neighbourRatio(chars) > 0.5) return `is mostly a run of neighbouring characters (like 0123… or abcd…); ${ADVICE}`;
  const bits = entropyBits(chars);
  if (bits < rule.minBits) return `carries about ${Math.floor(bits)} bits of entropy; at least ${rule.minBits} are required; ${ADVICE}`;
  return undefined;
}

/** The smallest p such that the value is a repetition (possibly cut short) of its first p characters. */
function periodOf(chars: readonly string[]): number {
  for (let period = 1; period < chars.length; period++) {
    let repeats = true;
    for (let i = period; i < chars.length && repeats; i++) repeats = chars[i] === chars[i - period];
    if (repeats) return period;
  }
  return chars.length;
}

/** The share of adjacent pairs that are equal or neighbours in code point order. */
function neighbourRatio(chars: readonly string[]): number {
  let neighbours = 0;
  for (let i = 1; i < chars.length; i++) {
    if (Math.abs(chars[i]!.codePointAt(0)! - chars[i - 1]!.codePointAt(0)!) <= 1) neighbours++;
  }
  return neighbours / Math.max(1, chars.length - 1);
}

function entropyBits(chars: readonly string[]): number {
  const counts = new Map<string, number>();
  for (const char of chars) counts.set(char, (counts.get(char) ?? 0) + 1);
  let perChar = 0;
  for (const count of counts.values()) {
    const p = count / chars.length;
    perChar -= p * Math.log2(p);
  }
  return perChar * chars.length;
}

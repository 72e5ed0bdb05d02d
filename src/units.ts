// Strict parsers for the human-written quantities of requests and configuration.
// Each returns undefined for anything that is not exactly well-formed, so callers decide the error text.

const DURATION_UNITS_MS = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/** `500ms`, `5s`, `5m`, `1h`, `7d`, or a combination such as `1h30m`. Zero and negatives are not durations. */
export function parseDuration(text: string): number | undefined {
  if (!/^(?:\d{1,9}(?:ms|s|m|h|d))+$/.test(text)) return undefined;
  let total = 0;
  for (const [, amount, unit] of text.matchAll(/(\d+)(ms|s|m|h|d)/g)) {
    total += Number(amount) * DURATION_UNITS_MS[unit as keyof typeof DURATION_UNITS_MS];
  }
  return total > 0 && Number.isSafeInteger(total) ? total : undefined;
}

const MEMORY_UNITS = { b: 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3, t: 1024 ** 4 } as const;

/** `512m`, `2g`, `1024k`, `536870912b` (case-insensitive, optional trailing `b` as in `512mb`). */
export function parseMemory(text: string): number | undefined {
  const match = /^(\d{1,15})([bkmgt])b?$/i.exec(text);
  if (!match) return undefined;
  const bytes = Number(match[1]) * MEMORY_UNITS[match[2]!.toLowerCase() as keyof typeof MEMORY_UNITS];
  return bytes > 0 && Number.isSafeInteger(bytes) ? bytes : undefined;
}

/** `0.5`, `2`, `1.25`: a positive decimal with at most three decimals (Podman's precision is 1/1000 CPU). */
export function parseCpus(text: string): number | undefined {
  if (!/^\d{1,4}(?:\.\d{1,3})?$/.test(text)) return undefined;
  const cpus = Number(text);
  return cpus > 0 ? cpus : undefined;
}

export function formatDuration(ms: number): string {
  for (const unit of ['d', 'h', 'm', 's'] as const) {
    const size = DURATION_UNITS_MS[unit];
    if (ms % size === 0) return `${ms / size}${unit}`;
  }
  return `${ms}ms`;
}

// How values read on the page: sizes, times, identifiers.

const SIZE_UNITS = ['B', 'KB', 'MB', 'GB', 'TB'];

/** 164093952 → "164.1 MB" (decimal units, as Podman shows them). */
export function formatBytes(bytes: number): string {
  let value = bytes;
  let unit = 0;
  while (value >= 1000 && unit < SIZE_UNITS.length - 1) {
    value /= 1000;
    unit++;
  }
  return `${unit === 0 ? value : value.toFixed(1)} ${SIZE_UNITS[unit]}`;
}

const dateTime = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'medium' });

/** An ISO 8601 time in the reader's locale and time zone. */
export function formatTime(iso: string): string {
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? iso : dateTime.format(date);
}

/** "job-4e9b2c7d-0a1f-…" → "job-4e9b2c7d": long ids shortened for tables (the full id stays in the link and title). */
export function shortId(id: string): string {
  const match = /^([a-z]+-)?([0-9a-f]{8})-[0-9a-f-]{27}$/i.exec(id);
  return match ? `${match[1] ?? ''}${match[2]}` : id;
}

// What commands print: with --output json the server's answer as JSON (for scripts), with --output table
// aligned columns or label/value lines (for people). Commands never format for one mode only. What the
// server sent is printed through terminal-text.ts: its control characters are shown, never obeyed.
import { terminalJson, visible } from './terminal-text.js';

export type OutputFormat = 'table' | 'json';
export const OUTPUT_FORMATS: readonly OutputFormat[] = ['table', 'json'];

export interface Column<T> {
  readonly header: string;
  readonly value: (row: T) => string;
}

/** A writable stream as far as printing needs it (process.stdout, process.stderr, a test double). */
export interface Sink {
  write(text: string): unknown;
  readonly isTTY?: boolean;
}

export class Output {
  constructor(
    readonly format: OutputFormat,
    private readonly stdout: Sink = process.stdout,
  ) {}

  /** Prints `value` as indented JSON whatever the format (for `--json` and json mode). */
  json(value: unknown): void {
    this.stdout.write(`${terminalJson(value)}\n`);
  }

  /** Rows as aligned columns; in json mode the server's answer `raw` instead. */
  list<T>(raw: unknown, rows: readonly T[], columns: readonly Column<T>[], empty: string): void {
    if (this.format === 'json') return this.json(raw);
    if (rows.length === 0) return this.line(empty);
    this.stdout.write(alignColumns([columns.map((c) => c.header), ...rows.map((row) => columns.map((c) => visible(c.value(row))))]));
  }

  /** One record as `label  value` lines; in json mode `raw` instead. Fields whose value is undefined are left out. */
  record(raw: unknown, fields: ReadonlyArray<readonly [label: string, value: string | undefined]>): void {
    if (this.format === 'json') return this.json(raw);
    const shown = fields.filter((field): field is readonly [string, string] => field[1] !== undefined);
    this.stdout.write(alignColumns(shown.map(([label, value]) => [`${label}:`, visible(value)])));
  }

  /** A line for people; json mode prints it too only when the command has nothing machine-readable to say. */
  line(text: string): void {
    this.stdout.write(`${visible(text)}\n`);
  }
}

/** Pads every column but the last to its widest cell; multi-line values keep their own lines. */
export function alignColumns(rows: readonly (readonly string[])[]): string {
  const widths: number[] = [];
  for (const row of rows) {
    row.forEach((cell, i) => {
      widths[i] = Math.max(widths[i] ?? 0, visibleWidth(cell));
    });
  }
  return rows
    .map((row) =>
      row
        .map((cell, i) => (i === row.length - 1 ? cell : cell + ' '.repeat((widths[i] ?? 0) - visibleWidth(cell))))
        .join('  ')
        .trimEnd(),
    )
    .map((line) => `${line}\n`)
    .join('');
}

const ANSI = /\x1b\[[0-9;]*m/g;

function visibleWidth(text: string): number {
  return [...text.replace(ANSI, '')].length;
}

type Style = 'bold' | 'dim' | 'red' | 'green' | 'yellow' | 'cyan';
const CODES: Record<Style, [number, number]> = { bold: [1, 22], dim: [2, 22], red: [31, 39], green: [32, 39], yellow: [33, 39], cyan: [36, 39] };

/**
 * `text` in a style when `stream` is a terminal and NO_COLOR is unset; plain otherwise. `text` is made
 * visible first (it often holds what the server said), so the only escape codes are the style's own.
 */
export function styled(stream: Sink, style: Style, text: string): string {
  const shown = visible(text);
  if (!stream.isTTY || process.env.NO_COLOR) return shown;
  const [open, close] = CODES[style];
  return `\x1b[${open}m${shown}\x1b[${close}m`;
}

/** Bytes as people read them: 164093952 → "156.5 MiB". */
export function humanBytes(bytes: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return unit === 0 ? `${value} B` : `${value.toFixed(1)} ${units[unit]}`;
}

/** An ISO time as a short local one, e.g. "2030-01-01 12:00:07"; anything else unchanged. */
export function shortTime(iso: string | null | undefined): string {
  if (!iso) return '';
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return iso;
  const pad = (n: number) => String(n).padStart(2, '0');
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())} ${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}`;
}

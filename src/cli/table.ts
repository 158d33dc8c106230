/**
 * Rows as a plain-text table: a header of upper-case column names, each
 * column as wide as its widest cell, two spaces between columns.
 */
export function table(columns: readonly string[], rows: ReadonlyArray<readonly string[]>): string {
  const header = columns.map((column) => column.toUpperCase());
  const widths = header.map((title, index) => Math.max(title.length, ...rows.map((row) => (row[index] ?? '').length)));
  return [header, ...rows]
    .map((cells) =>
      cells.map((cell, index) => (index === cells.length - 1 ? cell : cell.padEnd(widths[index]!))).join('  '),
    )
    .join('\n');
}

/** Label and value pairs, one a line, the values aligned. */
export function fields(pairs: ReadonlyArray<readonly [string, string]>): string {
  const width = Math.max(...pairs.map(([label]) => label.length));
  return pairs.map(([label, value]) => `${label.padEnd(width)}  ${value}`).join('\n');
}

/** An API timestamp, to the second, for a table. */
export function shortTime(timestamp: string | null): string {
  return timestamp === null ? '-' : timestamp.replace(/\.\d+Z$/, 'Z');
}

/** A span of seconds as people read it: 12 ms, 42 s, 3 min 5 s, 2 h 10 min. */
export function duration(seconds: number | null): string {
  if (seconds === null) return '-';
  if (seconds < 1) return `${Math.round(seconds * 1000)} ms`;
  if (seconds < 60) return `${Math.round(seconds * 10) / 10} s`;
  const whole = Math.round(seconds);
  if (whole < 3600) return `${Math.floor(whole / 60)} min ${whole % 60} s`;
  return `${Math.floor(whole / 3600)} h ${Math.floor((whole % 3600) / 60)} min`;
}

/** A JSON value in one line; `-` for null. */
export function compactJson(value: unknown): string {
  return value === null || value === undefined ? '-' : JSON.stringify(value);
}

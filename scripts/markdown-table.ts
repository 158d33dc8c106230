/** A Markdown table of `rows` under `header`; a `|` in a cell is escaped. */
export function markdownTable(header: readonly string[], rows: ReadonlyArray<readonly string[]>): string {
  const line = (cells: readonly string[]) => `| ${cells.map((cell) => cell.replaceAll('|', '\\|')).join(' | ')} |\n`;
  return line(header) + line(header.map(() => '---')) + rows.map(line).join('');
}

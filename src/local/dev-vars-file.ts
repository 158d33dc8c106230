import { writeFile } from 'node:fs/promises';

/**
 * Writes the Worker's variables as a `.dev.vars`-style file for `wrangler dev
 * --env-file`. A file, not `--var`, because wrangler prints `--var` values in
 * its bindings table and `ps` shows command lines, and these are secrets.
 */
export async function writeDevVarsFile(path: string, vars: Readonly<Record<string, string>>): Promise<void> {
  await writeFile(path, devVarsLines(vars).join(''), { mode: 0o600 });
}

/**
 * The variables as `.dev.vars` lines, each ending in a line break. Values
 * are single-quoted, which dotenv reads without escapes, and every `$` is
 * written `\$`, which dotenv-expand (run by wrangler after dotenv) turns back
 * into `$` instead of expanding a variable. What such a file cannot hold is
 * a single quote or a line break.
 */
export function devVarsLines(vars: Readonly<Record<string, string>>): string[] {
  return Object.entries(vars).map(([name, value]) => {
    if (/['\r\n]/.test(value)) throw new Error(`${name} cannot contain a single quote or a line break`);
    return `${name}='${value.replaceAll('$', '\\$')}'\n`;
  });
}

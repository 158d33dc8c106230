/**
 * The tables of docs/configuration.md, made from the settings' one
 * definition (SHARED_SETTINGS, WORKER_SETTINGS, NODE_WORKER_SETTINGS and
 * WORKER_BINDINGS). Each table sits between `<!-- table: name -->` and
 * `<!-- end table -->`; the prose around them is written by hand.
 * test/package/configuration-docs.test.ts fails when the committed file and
 * the settings differ.
 *
 *   npm run docs:config    (rewrites the tables in docs/configuration.md)
 */
import { readFile, writeFile } from 'node:fs/promises';
import type { Setting, SettingGroup } from '../src/drain/setting';
import { SHARED_SETTINGS } from '../src/drain/settings';
import { NODE_WORKER_SETTINGS } from '../src/node-worker/settings';
import { WORKER_BINDINGS } from '../src/worker/env';
import { WORKER_SETTINGS } from '../src/worker/settings';
import { markdownTable } from './markdown-table';

export const CONFIGURATION_FILE = new URL('../docs/configuration.md', import.meta.url);

/** Each table by the name its markers give it. */
const TABLES: Readonly<Record<string, () => string>> = {
  worker: () => settingsTable(WORKER_SETTINGS),
  'node-worker': () => settingsTable(NODE_WORKER_SETTINGS),
  shared: () => settingsTable(SHARED_SETTINGS),
  bindings: () =>
    markdownTable(
      ['binding', 'declared as', 'what'],
      Object.entries(WORKER_BINDINGS).map(([name, binding]) => [`\`${name}\``, binding.declared, binding.description]),
    ),
};

/** The document with every table made again from the settings; a missing or unknown table is refused. */
export function withTables(document: string): string {
  const seen = new Set<string>();
  const made = document.replace(
    /(<!-- table: ([\w-]+) -->\n)[\s\S]*?(<!-- end table -->)/g,
    (_block, start: string, name: string, end: string) => {
      const make = TABLES[name];
      if (make === undefined) throw new Error(`docs/configuration.md names a table "${name}" that no settings make`);
      seen.add(name);
      return `${start}${make()}${end}`;
    },
  );
  const missing = Object.keys(TABLES).filter((name) => !seen.has(name));
  if (missing.length > 0) throw new Error(`docs/configuration.md has no place for the table ${missing.join(', ')}`);
  return made;
}

function settingsTable(group: SettingGroup): string {
  return markdownTable(
    ['variable', 'option', 'accepts', 'default', 'what'],
    Object.entries(group).map(([option, each]) => [
      `\`${each.variable}\`${each.secret ? ' (secret)' : ''}`,
      each.option === false ? '' : `\`${option}\``,
      each.kind.accepts,
      defaultOf(each),
      each.description,
    ]),
  );
}

function defaultOf(each: Setting<unknown>): string {
  if ('default' in each) return `\`${each.kind.show(each.default)}\``;
  if ('defaultFrom' in each) return each.defaultFrom.shown;
  return each.unset;
}

async function main(): Promise<void> {
  const document = await readFile(CONFIGURATION_FILE, 'utf8');
  await writeFile(CONFIGURATION_FILE, withTables(document));
  console.log(`wrote ${CONFIGURATION_FILE.pathname}`);
}

if (import.meta.url === `file://${process.argv[1]}`) await main();

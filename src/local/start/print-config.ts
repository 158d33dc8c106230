import { basename } from 'node:path';
import { withoutPassword } from '../../cli/database-url.js';
import { devVarsLines } from '../dev-vars-file.js';
import { findWranglerConfig } from '../wrangler-config.js';
import { localPaths } from './local-paths.js';
import { savedSecret } from './saved-secret.js';
import type { StartConfig } from './start-config.js';
import { makeStateDir } from './state-dir.js';

/**
 * `skiplock dev --print-config`: for those who run `wrangler dev` themselves,
 * the lines that make their Worker reach DATABASE_URL's Postgres through a
 * Hyperdrive binding, with the same dev keys `skiplock dev` uses. Starts nothing.
 */
export async function printDevConfig(config: StartConfig): Promise<void> {
  const configName = basename(await findWranglerConfig(config.projectDir));
  const database = config.database;
  if (database === undefined) {
    throw new Error(
      '--print-config needs DATABASE_URL, the Postgres your Worker is to reach (without it, skiplock dev runs one of its own)',
    );
  }
  if (new URL(database.url).password === '') {
    throw new Error(
      'DATABASE_URL has no password, and wrangler refuses a Hyperdrive localConnectionString without one: add one (ALTER ROLE ... PASSWORD)',
    );
  }
  const paths = localPaths(config.projectDir, config.stateDir);
  await makeStateDir(paths.stateDir);
  const adminToken = config.adminToken ?? (await savedSecret(paths.adminToken)).secret;
  const statusTokenSecret = (await savedSecret(paths.statusTokenSecret)).secret;
  const lines = [
    `# .dev.vars, beside ${configName} (wrangler dev reads it; keep it out of git)`,
    ...devVarsLines({ ADMIN_TOKEN: adminToken, STATUS_TOKEN_SECRET: statusTokenSecret }).map((line) => line.trimEnd()),
    '',
    `# ${configName}: the database through Hyperdrive; wrangler dev connects to localConnectionString, a deploy to the id's database`,
    ...hyperdriveBinding(configName, database.url),
    '',
    '# then, in this folder: the schema, the Worker with its cron endpoint, and a cron tick (a drain)',
    `npx skiplock migrate --database-url '${database.url}'`,
    'npx wrangler dev --test-scheduled',
    "curl 'http://127.0.0.1:8787/__scheduled?cron=*+*+*+*+*'",
  ];
  console.log(lines.join('\n'));
  console.error(`(printed for ${withoutPassword(database.url)}; nothing was started)`);
}

function hyperdriveBinding(configName: string, url: string): string[] {
  const id = '<your Hyperdrive configuration id>';
  if (configName.endsWith('.toml')) {
    return [
      '[[hyperdrive]]',
      'binding = "HYPERDRIVE"',
      `id = "${id}"`,
      `localConnectionString = ${JSON.stringify(url)}`,
    ];
  }
  return [
    `"hyperdrive": [{ "binding": "HYPERDRIVE", "id": "${id}", "localConnectionString": ${JSON.stringify(url)} }]`,
  ];
}

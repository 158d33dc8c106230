import { PostgresStartError, startEmbeddedPostgres } from '../embedded-postgres.js';
import { runningPostmasterPid } from '../postmaster-pid.js';
import { waitUntilGone } from '../processes.js';
import { parseDatabaseUrl, withoutPassword, type DatabaseTarget } from '../../cli/database-url.js';
import { shownPath } from './local-paths.js';
import type { PostgresDataDir } from './postgres-data-dir.js';
import { postgresPassword } from './postgres-password.js';

/** The Postgres that `skiplock dev` runs against. */
export interface DatabaseInUse {
  readonly target: DatabaseTarget;
  /** Where it is, for the banner. */
  readonly description: string;
  /** The embedded server's data folder, as shown to the user; undefined for DATABASE_URL's. */
  readonly dataDir?: string;
  /** Settles if the server exits while in use; never, for a server someone else runs. */
  readonly exited: Promise<void>;
  stop(): Promise<void>;
}

/** DATABASE_URL's server: someone else runs it, so there is nothing to watch or stop. */
export function externalDatabase(target: DatabaseTarget): DatabaseInUse {
  return {
    target,
    description: `${withoutPassword(target.url)} (DATABASE_URL)`,
    exited: new Promise(() => {}),
    stop: async () => {},
  };
}

/** The embedded Postgres, its data kept so jobs survive a restart, its password in `passwordFile`. */
export async function startEmbeddedDatabase(
  dataDir: PostgresDataDir,
  passwordFile: string,
  port: number,
  projectDir?: string,
): Promise<DatabaseInUse> {
  const shown = shownPath(dataDir.path);
  const other = await runningPostmasterPid(dataDir.path);
  if (other !== undefined) {
    throw new Error(
      `another Postgres (pid ${other}) is using ${shown}: stop the skiplock dev that runs it, or that server (kill -INT ${other})`,
    );
  }
  const { password, rotate } = await postgresPassword(dataDir.path, passwordFile);
  const server = await startEmbeddedPostgres({
    dataDir: dataDir.path,
    port,
    persistent: true,
    password,
    projectDir,
  }).catch((error: unknown) => {
    if (!(error instanceof PostgresStartError)) throw error;
    throw new Error(
      `the embedded Postgres in ${shown} did not start: ${error.message}; if that folder is damaged, move it away to start afresh`,
    );
  });
  const pid = await runningPostmasterPid(dataDir.path);
  if (pid === undefined) throw new Error(`the embedded Postgres in ${shown} exited right after starting`);
  const url = rotate === undefined ? server.url : await rotate(server.url);
  return {
    target: parseDatabaseUrl(url, 'the embedded Postgres URL'),
    description: `embedded Postgres on 127.0.0.1:${port}, data in ${shown}${dataDir.reason ? ` (${dataDir.reason})` : ''}`,
    dataDir: shown,
    exited: waitUntilGone(pid, Infinity).then(() => {}),
    stop: () => server.stop(),
  };
}

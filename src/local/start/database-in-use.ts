import { startEmbeddedPostgres } from '../embedded-postgres.js';
import { runningPostmasterPid } from '../postmaster-pid.js';
import { waitUntilGone } from '../processes.js';
import { parseDatabaseUrl, withoutPassword, type DatabaseTarget } from '../../cli/database-url.js';
import { shownPath } from './local-paths.js';
import { postgresPassword } from './postgres-password.js';

/** The Postgres that `npm start` runs against. */
export interface DatabaseInUse {
  readonly target: DatabaseTarget;
  /** Where it is, for the banner. */
  readonly description: string;
  /** Settles if the server exits while in use; never, for a server someone else runs. */
  readonly exited: Promise<void>;
  stop(): Promise<void>;
}

const STOP_TIMEOUT_MS = 30_000;

/** DATABASE_URL's server: someone else runs it, so there is nothing to watch or stop. */
export function externalDatabase(target: DatabaseTarget): DatabaseInUse {
  return {
    target,
    description: `${withoutPassword(target.url)} (DATABASE_URL)`,
    exited: new Promise(() => {}),
    stop: async () => {},
  };
}

/** The embedded Postgres, its data kept in `dataDir` so jobs survive a restart, its password in `passwordFile`. */
export async function startEmbeddedDatabase(dataDir: string, passwordFile: string, port: number): Promise<DatabaseInUse> {
  const other = await runningPostmasterPid(dataDir);
  if (other !== undefined) {
    throw new Error(
      `another Postgres (pid ${other}) is using ${shownPath(dataDir)}: stop the npm start that runs it, or that server (kill -INT ${other})`,
    );
  }
  const { password, rotate } = await postgresPassword(dataDir, passwordFile);
  const server = await startEmbeddedPostgres({ dataDir, port, persistent: true, password }).catch((error: unknown) => {
    // embedded-postgres rejects with nothing when the server exits during start, and keeps its log to itself.
    const reason = error instanceof Error ? `: ${error.message}` : '';
    throw new Error(
      `the embedded Postgres in ${shownPath(dataDir)} did not start${reason}; if that folder is damaged, move it away to start afresh`,
    );
  });
  const pid = await runningPostmasterPid(dataDir);
  if (pid === undefined) throw new Error(`the embedded Postgres in ${shownPath(dataDir)} exited right after starting`);
  const url = rotate === undefined ? server.url : await rotate(server.url);
  return {
    target: parseDatabaseUrl(url, 'the embedded Postgres URL'),
    description: `embedded Postgres on 127.0.0.1:${port}, data in ${shownPath(dataDir)}`,
    exited: waitUntilGone(pid, Infinity).then(() => {}),
    async stop() {
      // embedded-postgres waits for an exit event that never comes when the
      // server has already exited (a Ctrl-C in the terminal reaches it
      // directly), so watching the pid decides when it is down.
      const gone = waitUntilGone(pid, STOP_TIMEOUT_MS).then((down) => {
        if (!down) throw new Error(`Postgres (pid ${pid}) did not stop within ${STOP_TIMEOUT_MS / 1000} s`);
      });
      await Promise.race([server.stop(), gone]);
    },
  };
}

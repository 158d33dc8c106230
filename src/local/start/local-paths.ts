import { join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository root: `npm start` works on its own checkout wherever it was started from. */
export const projectRoot = resolve(fileURLToPath(import.meta.url), '../../../..');

const dataDir = join(projectRoot, '.data');

/** What `npm start` keeps between runs, all under the git-ignored `.data/`. */
export const localPaths = {
  dataDir,
  postgresData: join(dataDir, 'postgres'),
  adminToken: join(dataDir, 'admin-token'),
  /** The embedded Postgres's superuser password, random, made with its cluster. */
  postgresPassword: join(dataDir, 'postgres-password'),
  /** The Worker's variables, regenerated on every start. */
  workerVars: join(dataDir, 'worker.env'),
  wranglerState: join(dataDir, 'wrangler'),
  wranglerLog: join(dataDir, 'wrangler.log'),
};

/** A path as people see it in messages: relative to the repository when inside it. */
export function shownPath(path: string): string {
  const inside = relative(projectRoot, path);
  return inside.startsWith('..') ? path : inside;
}

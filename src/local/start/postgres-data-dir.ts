import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { canEnter, serverUser } from '../server-user.js';
import { ownSharedFolder } from '../shared-folder.js';
import type { LocalPaths } from './local-paths.js';

/** Where `skiplock dev` keeps the embedded Postgres's data, and why there when it is not the usual place. */
export interface PostgresDataDir {
  readonly path: string;
  readonly reason?: string;
}

/**
 * `postgres` in the state folder; but root runs Postgres as the `postgres`
 * user, which cannot reach a project inside a folder only root can enter
 * (root's home, most often). Then the data goes to a folder of this project's
 * own under /var/tmp, named after its path, so another project gets its own.
 */
export async function postgresDataDir(paths: LocalPaths): Promise<PostgresDataDir> {
  const user = await serverUser();
  if (user === undefined || (await canEnter(paths.stateDir, user))) return { path: paths.postgresData };
  const project = createHash('sha256').update(paths.projectDir).digest('hex').slice(0, 12);
  const folder = await ownSharedFolder(`skiplock-data-${project}`);
  return { path: join(folder, 'postgres'), reason: `the ${user.name} user cannot enter ${paths.projectDir}` };
}

import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { canEnter, serverUser } from '../server-user.js';
import { ownSharedFolder } from '../shared-folder.js';
import { localPaths, projectRoot } from './local-paths.js';

/** Where `npm start` keeps the embedded Postgres's data, and why there when it is not the usual place. */
export interface PostgresDataDir {
  readonly path: string;
  readonly reason?: string;
}

/**
 * `.data/postgres` in the checkout; but root runs Postgres as the `postgres`
 * user, which cannot reach a checkout inside a folder only root can enter
 * (root's home, most often). Then the data goes to a folder of this checkout's
 * own under /var/tmp, named after its path, so another checkout gets its own.
 */
export async function postgresDataDir(): Promise<PostgresDataDir> {
  const user = await serverUser();
  if (user === undefined || (await canEnter(localPaths.dataDir, user))) return { path: localPaths.postgresData };
  const checkout = createHash('sha256').update(projectRoot).digest('hex').slice(0, 12);
  const folder = await ownSharedFolder(`skiplock-data-${checkout}`);
  return { path: join(folder, 'postgres'), reason: `the ${user.name} user cannot enter ${projectRoot}` };
}

import { chmod, cp, mkdtemp, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { projectRoot } from './repository-root';

/**
 * A copy of the repository with node_modules linked in, so that a test's
 * `npm start` keeps its `.data/` (worker variables, wrangler state and log,
 * an embedded Postgres) out of the developer's own, which an `npm start` may
 * be using right now. Readable by all, as an embedded Postgres started by
 * root runs as another user that must reach its data folder inside.
 */
export async function scratchCheckout(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'skiplock-start-'));
  await chmod(dir, 0o755);
  for (const entry of ['package.json', 'tsconfig.json', 'wrangler.toml', 'src', 'migrations']) {
    await cp(join(projectRoot, entry), join(dir, entry), { recursive: true });
  }
  await symlink(join(projectRoot, 'node_modules'), join(dir, 'node_modules'));
  return dir;
}

import { chmod, mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { startEmbeddedPostgres } from '../src/local/embedded-postgres';
import { anyFreePort } from '../src/local/ports';
import { startEmbeddedDatabase } from '../src/local/start/database-in-use';

async function logsIn(url: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: url });
  try {
    await client.connect();
    await client.end();
    return true;
  } catch {
    return false;
  }
}

describe("npm start's embedded Postgres password", () => {
  const folders: string[] = [];
  afterAll(() => Promise.all(folders.map((folder) => rm(folder, { recursive: true, force: true }))));

  // A new cluster's random password: test/security/local-proxy.test.ts, on a fresh npm start.
  it('changes the old "postgres" of a cluster made before to a random one, kept owner-only, and reads it back next time', {
    timeout: 120_000,
  }, async () => {
    const folder = await mkdtemp(join(tmpdir(), 'skiplock-password-'));
    folders.push(folder);
    // As root, the server runs as another user, which must reach its data folder.
    await chmod(folder, 0o755);
    const dataDir = join(folder, 'postgres');
    const passwordFile = join(folder, 'postgres-password');
    const port = await anyFreePort();
    // A cluster as npm start made them before: password "postgres", no password file.
    const old = await startEmbeddedPostgres({ dataDir, port, persistent: true, password: 'postgres' });
    await old.stop();

    const database = await startEmbeddedDatabase({ path: dataDir }, passwordFile, port);
    try {
      const password = (await readFile(passwordFile, 'utf8')).trim();
      const withOld = new URL(database.target.url);
      withOld.password = 'postgres';

      expect(password).toMatch(/^[A-Za-z0-9_-]{32}$/);
      expect(decodeURIComponent(new URL(database.target.url).password)).toBe(password);
      expect((await stat(passwordFile)).mode & 0o777).toBe(0o600);
      expect(await logsIn(database.target.url)).toBe(true);
      expect(await logsIn(withOld.href)).toBe(false);
    } finally {
      await database.stop();
    }

    // The next start reads the saved one.
    const again = await startEmbeddedDatabase({ path: dataDir }, passwordFile, port);
    try {
      expect(await logsIn(again.target.url)).toBe(true);
    } finally {
      await again.stop();
    }
  });
});

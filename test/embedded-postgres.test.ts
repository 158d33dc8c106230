import { chmod, chown, mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startEmbeddedPostgres } from '../src/local/embedded-postgres';
import { anyFreePort } from '../src/local/ports';
import { canEnter, serverUser } from '../src/local/server-user';

const isRoot = process.getuid?.() === 0;

describe('the embedded Postgres and the user it runs as', () => {
  const folders: string[] = [];
  afterEach(async () => {
    for (const folder of folders.splice(0)) await rm(folder, { recursive: true, force: true });
  });

  async function folder(mode: number): Promise<string> {
    const path = await mkdtemp(join(tmpdir(), 'skiplock-enter-'));
    folders.push(path);
    await chmod(path, mode);
    return path;
  }

  it('knows which folders a user can enter: by owner, primary group or anyone, all the way down', async () => {
    const stranger = { name: 'stranger', uid: 54_321, gid: 54_321 };
    const closed = await folder(0o700);
    const passable = await folder(0o711);
    await mkdir(join(passable, 'inner'), { mode: 0o755 });

    expect(await canEnter(closed, stranger)).toBe(false);
    expect(await canEnter(passable, stranger)).toBe(true);
    expect(await canEnter(join(passable, 'inner'), stranger)).toBe(true);
    expect(await canEnter(join(closed, 'missing'), stranger)).toBe(false);
    if (isRoot) {
      // Only root may hand a folder to another owner or group.
      await chown(closed, 0, stranger.gid);
      await chmod(closed, 0o710);
      expect(await canEnter(closed, stranger)).toBe(true);
      await chown(closed, stranger.uid, 0);
      await chmod(closed, 0o100);
      expect(await canEnter(closed, stranger)).toBe(true);
    }
  });

  it.runIf(isRoot)(
    'as root, runs Postgres as the postgres user, and refuses in one line a data folder that user cannot reach',
    async () => {
      expect(await serverUser()).toMatchObject({ name: 'postgres' });
      const closed = await folder(0o700);
      const start = startEmbeddedPostgres({
        dataDir: join(closed, 'data'),
        port: await anyFreePort(),
        persistent: false,
        password: 'unused',
      });
      await expect(start).rejects.toThrow(
        new RegExp(
          `^the user "postgres" that Postgres runs as cannot enter ${closed}, where its data folder is: [^\\n]+$`,
        ),
      );
    },
  );
});

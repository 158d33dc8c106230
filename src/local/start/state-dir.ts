import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileExists } from '../file-exists.js';

/** Makes the state folder, which ignores itself in git: nothing in it (keys, data) belongs in a commit. */
export async function makeStateDir(stateDir: string): Promise<void> {
  await mkdir(stateDir, { recursive: true });
  const ignore = join(stateDir, '.gitignore');
  if (!(await fileExists(ignore))) {
    await writeFile(ignore, '# Made by skiplock dev: keys and local data, never committed.\n*\n');
  }
}

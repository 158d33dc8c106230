import { randomBytes } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';

/**
 * The dev admin key kept in `file`, made on first use, so the key printed
 * yesterday (and pasted into scripts) still works after a restart.
 */
export async function savedAdminToken(file: string): Promise<string> {
  const saved = (await readFile(file, 'utf8').catch(() => '')).trim();
  if (saved) return saved;
  const token = randomBytes(24).toString('base64url');
  await writeFile(file, `${token}\n`, { mode: 0o600 });
  return token;
}

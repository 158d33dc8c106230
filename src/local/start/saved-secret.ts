import { readFile, writeFile } from 'node:fs/promises';
import { randomSecret } from '../random-secret.js';

/**
 * A secret kept in `file` (owner-only), made on first use, so what was
 * printed yesterday (the dev admin key, pasted into scripts) or set up once
 * (the embedded Postgres's password) still holds after a restart.
 */
export async function savedSecret(file: string): Promise<{ secret: string; created: boolean }> {
  const saved = await readSavedSecret(file);
  if (saved !== undefined) return { secret: saved, created: false };
  const secret = randomSecret();
  await writeFile(file, `${secret}\n`, { mode: 0o600 });
  return { secret, created: true };
}

/** The secret in `file`, or undefined when there is none yet. */
export async function readSavedSecret(file: string): Promise<string | undefined> {
  const saved = (await readFile(file, 'utf8').catch(() => '')).trim();
  return saved === '' ? undefined : saved;
}

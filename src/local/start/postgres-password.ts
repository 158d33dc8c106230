import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { withPgClient } from '../pg-client.js';
import { randomSecret } from '../random-secret.js';
import { shownPath } from './local-paths.js';
import { readSavedSecret, savedSecret } from './saved-secret.js';
import { fileExists } from '../file-exists.js';

/** What clusters made before passwords were random were given. */
const LEGACY_PASSWORD = 'postgres';

/**
 * The embedded Postgres's superuser password, kept in `file` beside the
 * data. A new cluster gets a random one. A cluster made before that (its
 * data folder exists, the file does not) still has the old fixed password:
 * `rotate` is called once it runs, to change it to a random one.
 */
export async function postgresPassword(
  dataDir: string,
  file: string,
): Promise<{ password: string; rotate?: (url: string) => Promise<string> }> {
  const saved = await readSavedSecret(file);
  if (saved !== undefined) return { password: saved };
  if (!(await fileExists(join(dataDir, 'PG_VERSION')))) return { password: (await savedSecret(file)).secret };
  return {
    password: LEGACY_PASSWORD,
    rotate: async (url) => {
      const password = randomSecret();
      // A password cannot be a parameter of ALTER ROLE; this one is base64url, made here, never input.
      await withPgClient(url, (client) => client.query(`ALTER ROLE CURRENT_USER PASSWORD '${password}'`));
      await writeFile(file, `${password}\n`, { mode: 0o600 });
      console.log(
        `the embedded Postgres had the password "postgres": changed to a random one, kept in ${shownPath(file)}`,
      );
      const rotated = new URL(url);
      rotated.password = password;
      return rotated.href;
    },
  };
}

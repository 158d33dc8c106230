import { fileURLToPath } from 'node:url';

/**
 * The package's entries resolved to the sources, as tsconfig.json's `paths`
 * does for tsc and wrangler: tests import `skiplock/worker` the way a user does.
 */
const entries: Record<string, string> = {
  'skiplock/worker': 'src/worker/index.ts',
  'skiplock/drain': 'src/drain/index.ts',
  'skiplock/node-worker': 'src/node-worker/index.ts',
  'skiplock/client': 'src/http/client.ts',
  'skiplock/pg': 'src/db/pg.ts',
  skiplock: 'src/index.ts',
};

export const packageAliases = Object.entries(entries).map(([name, path]) => ({
  find: new RegExp(`^${name}$`),
  replacement: fileURLToPath(new URL(`../../${path}`, import.meta.url)),
}));

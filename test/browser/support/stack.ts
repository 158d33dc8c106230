import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { projectRoot } from '../../support/repository-root';
import { startLocalWorker } from '../../../src/local/start/local-worker';
import { skiplockClient, type SkiplockClient } from '../../../src/http/client';
import { writeDevVarsFile } from '../../../src/local/dev-vars-file';
import { startNeonProxy } from '../../../src/local/neon-proxy';
import { anyFreePort } from '../../../src/local/ports';
import { createTestDatabase } from '../../support/database';
import { postgresAddressOf } from '../../support/postgres-address';

export const ADMIN_TOKEN = 'browser-test-admin';

export interface TestStackOptions {
  /** The Worker's CORS_ORIGINS: the origins that may call the API from a browser and frame status pages. */
  corsOrigins?: readonly string[];
}

/** The Worker under `wrangler dev`, as `npm start` runs it, on a fresh database of its own. */
export interface TestStack {
  url: string;
  databaseUrl: string;
  /** The typed API client, with the admin key. */
  api: SkiplockClient;
  stop(): Promise<void>;
}

/**
 * The run's Postgres (a fresh database cloned from the migrated template),
 * the local Neon proxy in front of it, and the Worker under `wrangler dev`
 * with the same pieces `npm start` uses; its variables, state and log go to a
 * temporary folder. Demo handlers are on (SKIPLOCK_DEV), so the tests use job
 * types without a handler when they must move jobs along themselves.
 */
export async function startTestStack(options: TestStackOptions = {}): Promise<TestStack> {
  const [database, folder] = await Promise.all([createTestDatabase(), mkdtemp(join(tmpdir(), 'skiplock-browser-'))]);
  const proxy = await startNeonProxy({ postgres: postgresAddressOf(database.url) });
  const envFile = join(folder, 'worker.env');
  await writeDevVarsFile(envFile, {
    DATABASE_URL: database.url,
    ADMIN_TOKEN,
    LOCAL_NEON_PROXY: proxy.address,
    SKIPLOCK_DEV: '1',
    CORS_ORIGINS: (options.corsOrigins ?? []).join(','),
  });
  // A port of the system's choosing: two files starting at once would both find 8787 free, and the loser's
  // health check would be answered by the winner's Worker, on the winner's database.
  const worker = await startLocalWorker(
    { variable: 'PORT', requested: await anyFreePort() },
    { projectRoot, envFile, persistTo: join(folder, 'wrangler'), logFile: join(folder, 'wrangler.log') },
    new AbortController().signal,
  );
  return {
    url: worker.url,
    databaseUrl: database.url,
    api: skiplockClient(worker.url, { apiKey: ADMIN_TOKEN }),
    async stop() {
      await worker.wrangler.stop();
      await proxy.close();
      await database.drop();
      await rm(folder, { recursive: true, force: true });
    },
  };
}

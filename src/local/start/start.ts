import { mkdir } from 'node:fs/promises';
import { writeDevVarsFile } from '../dev-vars-file.js';
import { startNeonProxy } from '../neon-proxy/index.js';
import { anyFreePort } from '../ports.js';
import { startScheduledTrigger } from '../scheduled-trigger.js';
import { readCronTriggers } from '../wrangler-config.js';
import { applyMigrations, describeMigrateResult } from '../../cli/apply-migrations.js';
import { PreReleaseSchemaError, type MigrateResult } from '../../migrate/runner.js';
import { banner } from './banner.js';
import { choosePort } from './choose-port.js';
import { externalDatabase, startEmbeddedDatabase, type DatabaseInUse } from './database-in-use.js';
import { chooseDrainSchedule, describeDrainSchedule } from './drain-schedule.js';
import { localPaths, projectRoot, shownPath } from './local-paths.js';
import { postgresDataDir } from './postgres-data-dir.js';
import { runCli } from '../../cli/run-cli.js';
import { savedSecret } from './saved-secret.js';
import { readStartConfig, type StartConfig } from './start-config.js';
import { describeExit, startLocalWorker } from './local-worker.js';
import { StopList } from './stop-list.js';
import { listenForStopSignals } from './stop-signals.js';

/**
 * `npm start`: Postgres (DATABASE_URL's, or an embedded one), the local Neon
 * proxy in front of it, the Worker under `wrangler dev`, and its cron drains,
 * until Ctrl-C or SIGTERM stops all of it.
 */
async function main(): Promise<void> {
  const stop = listenForStopSignals();
  // Once the terminal is gone, printing fails with EPIPE; stopping must go on regardless.
  for (const stream of [process.stdout, process.stderr]) stream.on('error', () => {});
  const config = readStartConfig(process.env);
  // Loading wrangler takes seconds: read its config while Postgres starts.
  const crons = readCronTriggers(projectRoot);
  // Awaited later; until then a failure must not count as unhandled.
  crons.catch(() => {});
  const running = new StopList();
  try {
    const stack = await startStack(config, crons, running, stop.signal);
    await Promise.race([
      stop.received,
      stack.died.then((what) => Promise.reject(new Error(`${what}; stopped everything else`))),
    ]);
  } catch (error) {
    // Stopping while starting aborts the wait for the Worker: that is a clean stop.
    if (!stop.signal.aborted) throw error;
  } finally {
    if (stop.signal.aborted) console.log(`stopping (${String(stop.signal.reason)})`);
    if (!(await running.stopAll((line) => console.error(line)))) process.exitCode = 1;
  }
  console.log('stopped');
}

interface RunningStack {
  /** Settles, saying what, when something the stack runs on stops by itself. */
  died: Promise<string>;
}

async function startStack(
  config: StartConfig,
  crons: Promise<string[]>,
  running: StopList,
  stopRequested: AbortSignal,
): Promise<RunningStack> {
  await mkdir(localPaths.dataDir, { recursive: true });
  const proxyPort = await choosePort(config.proxyPort, anyFreePort);

  const database = await startDatabase(config);
  running.add('Postgres', () => database.stop());
  console.log(`migrations: ${describeMigrateResult(await migrateDatabase(database))}`);

  const { host, port } = database.target;
  const proxy = await startNeonProxy({ postgres: { host, port }, port: proxyPort });
  running.add('the Neon proxy', () => proxy.close());

  const adminToken = config.adminToken ?? (await savedSecret(localPaths.adminToken)).secret;
  await writeDevVarsFile(localPaths.workerVars, {
    // The Neon driver sends this URL's host:port to the proxy as the address to reach.
    DATABASE_URL: database.target.url,
    ADMIN_TOKEN: adminToken,
    LOCAL_NEON_PROXY: proxy.address,
    SKIPLOCK_DEV: '1',
    // Drains keep under a Paid Worker's subrequest cap, as a deploy with WORKERS_PLAN=paid does.
    WORKERS_PLAN: 'paid',
    // The Worker checks these, and refuses one it cannot read in a line of its log.
    ...config.workerSettings,
  });
  const { wrangler, url: workerUrl } = await startLocalWorker(
    config.workerPort,
    {
      projectRoot,
      envFile: localPaths.workerVars,
      persistTo: localPaths.wranglerState,
      logFile: localPaths.wranglerLog,
    },
    stopRequested,
  );
  running.add('wrangler dev', () => wrangler.stop());

  const schedule = chooseDrainSchedule(await crons, config.drainEverySeconds);
  const logFile = shownPath(localPaths.wranglerLog);
  const trigger = startScheduledTrigger(workerUrl, schedule, (line) =>
    console.error(`${line} (Worker log: ${logFile})`),
  );
  running.add('the drain timer', () => trigger.stop());

  console.log(
    banner({
      workerUrl,
      adminToken,
      adminTokenSource: config.adminToken === undefined ? shownPath(localPaths.adminToken) : 'ADMIN_TOKEN',
      database: database.description,
      drains: describeDrainSchedule(schedule),
      logFile,
    }),
  );
  return {
    died: Promise.race([
      wrangler.exited.then((exit) => `wrangler dev ${describeExit(exit)} (its log: ${logFile})`),
      database.exited.then(() => 'the embedded Postgres exited'),
    ]),
  };
}

/** The migrations; an embedded database made by a pre-release skiplock is to be thrown away, and the message says how. */
async function migrateDatabase(database: DatabaseInUse): Promise<MigrateResult> {
  return applyMigrations(database.target).catch((error: unknown) => {
    if (!(error instanceof PreReleaseSchemaError) || database.dataDir === undefined) throw error;
    throw new Error(
      `the embedded Postgres in ${database.dataDir} has skiplock's schema from before its first release, which cannot be upgraded: ` +
        `delete ${database.dataDir} (its jobs go with it) and npm start again`,
    );
  });
}

async function startDatabase(config: StartConfig): Promise<DatabaseInUse> {
  if (config.database !== undefined) return externalDatabase(config.database);
  const port = await choosePort(config.postgresPort, anyFreePort);
  return startEmbeddedDatabase(await postgresDataDir(), localPaths.postgresPassword, port);
}

runCli('skiplock start', main);

import { basename, join } from 'node:path';
import { writeDevVarsFile } from '../dev-vars-file.js';
import { delays, type NetworkDelay, startNeonProxy } from '../neon-proxy/index.js';
import { anyFreePort } from '../ports.js';
import { startScheduledTrigger } from '../scheduled-trigger.js';
import { readWranglerConfig } from '../wrangler-config.js';
import { applyMigrations, describeMigrateResult } from '../../cli/apply-migrations.js';
import { PreReleaseSchemaError, type MigrateResult } from '../../migrate/runner.js';
import { banner } from './banner.js';
import { checkPortFree, choosePort } from './choose-port.js';
import { externalDatabase, startEmbeddedDatabase, type DatabaseInUse } from './database-in-use.js';
import { chooseDrainSchedule, describeDrainSchedule } from './drain-schedule.js';
import { localPaths, shownPath, type LocalPaths } from './local-paths.js';
import { postgresDataDir } from './postgres-data-dir.js';
import { makeStateDir } from './state-dir.js';
import { savedSecret } from './saved-secret.js';
import { checkSkiplockBindings } from './skiplock-bindings.js';
import type { StartConfig } from './start-config.js';
import { describeExit, startLocalWorker } from './local-worker.js';
import { StopList } from './stop-list.js';
import { listenForStopSignals } from './stop-signals.js';
import { fileExists } from '../file-exists.js';

/**
 * `skiplock dev`: Postgres (DATABASE_URL's, or an embedded one), the local
 * Neon proxy in front of it, the project's Worker under its own `wrangler
 * dev`, and its cron drains, until Ctrl-C or SIGTERM stops all of it.
 */
export async function runDevStack(config: StartConfig): Promise<void> {
  const stop = listenForStopSignals();
  // Once the terminal is gone, printing fails with EPIPE; stopping must go on regardless.
  for (const stream of [process.stdout, process.stderr]) stream.on('error', () => {});
  const paths = localPaths(config.projectDir, config.stateDir);
  const running = new StopList();
  try {
    const stack = await startStack(config, paths, running, stop.signal);
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
  paths: LocalPaths,
  running: StopList,
  stopRequested: AbortSignal,
): Promise<RunningStack> {
  // What the user can get wrong is refused before anything starts.
  const wrangler = await readWranglerConfig(paths.projectDir);
  checkSkiplockBindings(wrangler);
  const configName = basename(wrangler.file);
  const schedule = chooseDrainSchedule(wrangler.crons, config.drainEverySeconds, configName);
  for (const port of [config.workerPort, config.postgresPort, config.proxyPort]) await checkPortFree(port);

  await makeStateDir(paths.stateDir);
  const database = await startDatabase(config, paths);
  running.add('Postgres', () => database.stop());
  console.log(`migrations: ${describeMigrateResult(await migrateDatabase(database))}`);

  const { host, port } = database.target;
  // Without PROXY_PORT the proxy binds a port the system hands it: a port probed free before
  // Postgres started and migrated could be taken by then.
  const proxy = await startNeonProxy({
    postgres: { host, port },
    port: config.proxyPort.requested,
    networkDelay: config.networkDelay,
  });
  running.add('the Neon proxy', () => proxy.close());

  const adminToken = config.adminToken ?? (await savedSecret(paths.adminToken)).secret;
  await writeDevVarsFile(paths.workerVars, {
    // The Neon driver sends this URL's host:port to the proxy as the address to reach.
    DATABASE_URL: database.target.url,
    ADMIN_TOKEN: adminToken,
    LOCAL_NEON_PROXY: proxy.address,
    // In dev mode the Worker derives the status-token secret from ADMIN_TOKEN; otherwise it needs one.
    ...(config.demoJobs
      ? { SKIPLOCK_DEV: '1' }
      : { STATUS_TOKEN_SECRET: (await savedSecret(paths.statusTokenSecret)).secret }),
    // Drains keep under a Paid Worker's subrequest cap, as a deploy with WORKERS_PLAN=paid does.
    WORKERS_PLAN: 'paid',
    // The Worker checks these, and refuses one it cannot read in a line of its log.
    ...config.workerSettings,
  });
  const projectVars = join(paths.projectDir, '.dev.vars');
  const { wrangler: wranglerDev, url: workerUrl } = await startLocalWorker(
    config.workerPort,
    {
      projectRoot: paths.projectDir,
      envFile: paths.workerVars,
      projectVarsFile: (await fileExists(projectVars)) ? projectVars : undefined,
      // A Hyperdrive binding reaches the same database under wrangler dev.
      environment: Object.fromEntries(
        wrangler.hyperdrives.map((binding) => [
          `CLOUDFLARE_HYPERDRIVE_LOCAL_CONNECTION_STRING_${binding}`,
          database.target.url,
        ]),
      ),
      persistTo: paths.wranglerState,
      logFile: paths.wranglerLog,
    },
    stopRequested,
  );
  running.add('wrangler dev', () => wranglerDev.stop());

  const logFile = shownPath(paths.wranglerLog);
  const trigger = startScheduledTrigger(workerUrl, schedule, (line) =>
    console.error(`${line} (Worker log: ${logFile})`),
  );
  running.add('the drain timer', () => trigger.stop());

  console.log(
    banner({
      workerUrl,
      adminToken,
      adminTokenSource: config.adminToken === undefined ? shownPath(paths.adminToken) : 'ADMIN_TOKEN',
      database: describeDatabase(database.description, config.networkDelay),
      drains: describeDrainSchedule(schedule, configName),
      logFile,
      demoJobs: config.demoJobs,
    }),
  );
  return {
    died: Promise.race([
      wranglerDev.exited.then((exit) => `wrangler dev ${describeExit(exit)} (its log: ${logFile})`),
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
        `delete ${database.dataDir} (its jobs go with it) and start again`,
    );
  });
}

async function startDatabase(config: StartConfig, paths: LocalPaths): Promise<DatabaseInUse> {
  if (config.database !== undefined) return externalDatabase(config.database);
  const port = await choosePort(config.postgresPort, anyFreePort);
  return startEmbeddedDatabase(await postgresDataDir(paths), paths.postgresPassword, port, paths.projectDir);
}

/** The database as the Worker reaches it: through a played network when one is set. */
function describeDatabase(description: string, delay: NetworkDelay): string {
  if (!delays(delay)) return description;
  const jitter = delay.jitterMs > 0 ? ` (+ up to ${delay.jitterMs} ms each way)` : '';
  return `${description}, a ${delay.roundTripMs} ms round trip away${jitter}`;
}

import { QueueDeliveries, readJobSettings, readNumber, readSwitch, type DrainVariables, type JobSettings } from '../drain/index.js';
import { MAX_CLAIM } from '../engine/index.js';
import { publicAddressFetch } from './public-address-fetch.js';
import type { WorkerOptions } from './start-worker.js';

/** What `skiplock work` reads from its environment. */
export interface WorkerVariables extends DrainVariables {
  readonly DATABASE_URL?: string | undefined;
  readonly WORKER_CONCURRENCY?: string | undefined;
  readonly WORKER_CLAIM_BATCH_SIZE?: string | undefined;
  readonly WORKER_ID?: string | undefined;
  readonly POLL_INTERVAL_MS?: string | undefined;
  readonly WORKER_LISTEN?: string | undefined;
  readonly WORKER_DELIVERIES?: string | undefined;
  readonly WORKER_PREPARED_STATEMENTS?: string | undefined;
  readonly SHUTDOWN_GRACE_SECONDS?: string | undefined;
}

export interface WorkerConfig {
  worker: Omit<WorkerOptions, 'handlers' | 'logger'>;
  jobs: JobSettings;
}

export function readWorkerConfig(vars: WorkerVariables): WorkerConfig {
  const databaseUrl = vars.DATABASE_URL?.trim();
  if (!databaseUrl) throw new Error('DATABASE_URL is not set: the worker needs the Postgres that holds the queue');
  const settings = readJobSettings(vars);
  // In Node nothing in front of the process keeps the `http` job off private addresses: this fetch does.
  const jobs = { ...settings, http: { ...settings.http, fetch: publicAddressFetch() } };
  const workerId = vars.WORKER_ID?.trim();
  const concurrency = readNumber(vars, 'WORKER_CONCURRENCY', 10, { min: 1, max: 1000, integer: true });
  return {
    jobs,
    worker: {
      databaseUrl,
      concurrency,
      claimBatchSize: readNumber(vars, 'WORKER_CLAIM_BATCH_SIZE', concurrency, { min: 1, max: MAX_CLAIM, integer: true }),
      pollIntervalMs: readNumber(vars, 'POLL_INTERVAL_MS', 1000, { min: 10 }),
      listen: readSwitch(vars, 'WORKER_LISTEN', true),
      preparedStatements: readSwitch(vars, 'WORKER_PREPARED_STATEMENTS', true),
      shutdownGraceMs: readNumber(vars, 'SHUTDOWN_GRACE_SECONDS', 20, { min: 0 }) * 1000,
      // Queues' webhook targets, signed with the secrets they name from this environment.
      ...(readSwitch(vars, 'WORKER_DELIVERIES', true)
        ? { deliveries: new QueueDeliveries({ http: jobs.http, secret: (name) => (vars as Readonly<Record<string, string | undefined>>)[name] }) }
        : {}),
      retentionSeconds: jobs.retentionSeconds,
      statsRetentionDays: jobs.statsRetentionDays,
      ...(workerId ? { workerId } : {}),
    },
  };
}

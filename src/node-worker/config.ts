import { QueueDeliveries, type JobSettings } from '../drain/index.js';
import { jobSettings, readSettings, SHARED_SETTINGS, type SettingVariables } from '../drain/internal.js';
import { publicAddressFetch } from './public-address-fetch.js';
import { NODE_WORKER_SETTINGS } from './settings.js';
import type { WorkerOptions } from './start-worker.js';

/** What `skiplock work` reads from its environment (beside the DELIVERY_SECRET_* its queues' webhook targets name). */
export interface WorkerVariables
  extends SettingVariables<typeof SHARED_SETTINGS>,
    SettingVariables<typeof NODE_WORKER_SETTINGS> {}

export interface WorkerConfig {
  worker: Omit<WorkerOptions, 'handlers' | 'logger'>;
  jobs: JobSettings;
}

/** The Node worker's settings from its environment; a value it cannot read is refused in one line naming the variable. */
export function readWorkerConfig(vars: WorkerVariables): WorkerConfig {
  const shared = readSettings(SHARED_SETTINGS, vars);
  const { deliverWebhooks, ...worker } = readSettings(NODE_WORKER_SETTINGS, vars);
  if (shared.databaseUrl === undefined)
    throw new Error('DATABASE_URL is not set: the worker needs the Postgres that holds the queue');
  const settings = jobSettings(shared);
  // In Node nothing in front of the process keeps the `http` job off private addresses: this fetch does.
  const jobs = { ...settings, http: { ...settings.http, fetch: publicAddressFetch() } };
  return {
    jobs,
    worker: {
      ...worker,
      databaseUrl: shared.databaseUrl,
      retentionSeconds: shared.retentionSeconds,
      statsRetentionDays: shared.statsRetentionDays,
      // Queues' webhook targets, signed with the secrets they name from this environment.
      ...(deliverWebhooks
        ? {
            deliveries: new QueueDeliveries({
              http: jobs.http,
              secret: (name) => (vars as Readonly<Record<string, string | undefined>>)[name],
            }),
          }
        : {}),
    },
  };
}

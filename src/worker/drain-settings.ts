import { DEFAULT_DRAIN_BUDGET_SECONDS, DEFAULT_DRAIN_CONCURRENCY } from '../drain/drain-once.js';
import { readJobSettings, readNumber, readSwitch, type JobSettings } from '../drain/settings.js';
import type { Env } from './env.js';

/** Cron drains: at most the 15 minutes of wall time a Cron Trigger gets. */
const MAX_DRAIN_BUDGET_SECONDS = 900;
/** Fast-path drains live in `waitUntil`, which ends 30 s after the response: leave room to hand back. */
const MAX_FAST_PATH_BUDGET_SECONDS = 25;
const DEFAULT_FAST_PATH_BUDGET_SECONDS = 20;

export interface WorkerDrainSettings extends JobSettings {
  budgetSeconds: number;
  concurrency: number;
  fastPath: boolean;
  fastPathBudgetSeconds: number;
}

export function readWorkerDrainSettings(env: Env): WorkerDrainSettings {
  return {
    ...readJobSettings(env),
    budgetSeconds: readNumber(env, 'DRAIN_BUDGET_SECONDS', DEFAULT_DRAIN_BUDGET_SECONDS, {
      min: 1,
      max: MAX_DRAIN_BUDGET_SECONDS,
    }),
    concurrency: readNumber(env, 'DRAIN_CONCURRENCY', DEFAULT_DRAIN_CONCURRENCY, { min: 1, max: 50, integer: true }),
    fastPath: readSwitch(env, 'FAST_PATH', true),
    fastPathBudgetSeconds: readNumber(env, 'FAST_PATH_BUDGET_SECONDS', DEFAULT_FAST_PATH_BUDGET_SECONDS, {
      min: 1,
      max: MAX_FAST_PATH_BUDGET_SECONDS,
    }),
  };
}

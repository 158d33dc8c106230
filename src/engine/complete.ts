import type { Queryable } from '../db/types.js';
import { StaleLeaseError } from './errors.js';
import { toJob } from './job-json.js';
import type { Job, Json, Lease } from './types.js';

export interface Completion extends Lease {
  result?: Json;
}

/**
 * Completes many jobs in one statement. A job completes only while its token
 * owns it, so a worker whose lease was taken over cannot complete it: exactly
 * once completion on top of at-least-once delivery.
 */
const completeSql = /* sql */ `
WITH input AS (
  SELECT * FROM jsonb_to_recordset($1::jsonb) AS x(id uuid, "leaseToken" uuid, result jsonb)
),
completed AS (
  UPDATE skiplock.jobs j
  SET state = 'succeeded', result = input.result, lease_token = NULL
  FROM input
  -- By key: the planner fetches each row by id. A token matches only while
  -- its job runs (jobs_lease_while_running), so no condition on state, which
  -- would tempt the planner to walk every running job instead.
  WHERE j.id = ANY(ARRAY(SELECT id FROM input))
    AND j.id = input.id AND j.lease_token = input."leaseToken"
  RETURNING j.id, input."leaseToken" AS lease_token, j.attempts, j.worker_id,
            -- Only when asked: building the job is a third of the statement's cost.
            CASE WHEN $2::boolean THEN skiplock.job_json(j) END AS job
),
events AS (
  INSERT INTO skiplock.job_events (job_id, kind, attempt, worker_id)
  SELECT id, 'completed', attempts, worker_id FROM completed
)
SELECT input.id, completed.id IS NOT NULL AS done, completed.job
FROM input LEFT JOIN completed ON completed.id = input.id AND completed.lease_token = input."leaseToken"`;

export interface CompleteManyResult {
  /** Ids of the jobs this call completed. */
  completed: string[];
  /** Ids whose token no longer owned the job; those jobs were not changed. */
  stale: string[];
}

async function runCompletions(db: Queryable, completions: readonly Completion[], withJobs: boolean) {
  return db.query<{ id: string; done: boolean; job: Job | null }>({
    name: 'skiplock_complete',
    text: completeSql,
    params: [
      JSON.stringify(completions.map(({ id, leaseToken, result }) => ({ id, leaseToken, result: result ?? null }))),
      withJobs,
    ],
  });
}

/** Completes a batch in one statement (the drain's group commit); reports which were stale. */
export async function completeMany(db: Queryable, completions: readonly Completion[]): Promise<CompleteManyResult> {
  if (completions.length === 0) return { completed: [], stale: [] };
  const rows = await runCompletions(db, completions, false);
  return {
    completed: rows.filter((row) => row.done).map((row) => row.id),
    stale: rows.filter((row) => !row.done).map((row) => row.id),
  };
}

/** Completes one job and returns it; throws StaleLeaseError if its token no longer owns it. */
export async function complete(db: Queryable, completion: Completion): Promise<Job> {
  const [row] = await runCompletions(db, [completion], true);
  if (!row?.done) throw new StaleLeaseError([completion.id]);
  return toJob(row.job!);
}

import type { Queryable } from '../db/types';
import { StaleLeaseError } from './errors';
import type { Job, Json, Lease } from './types';

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
  SET state = 'succeeded', result = input.result
  FROM input
  WHERE j.id = input.id AND j.lease_token = input."leaseToken" AND j.state = 'running'
  RETURNING j.id, j.lease_token, j.attempts, j.worker_id, skiplock.job_json(j) AS job
),
events AS (
  INSERT INTO skiplock.job_events (job_id, kind, attempt, worker_id)
  SELECT id, 'completed', attempts, worker_id FROM completed
)
SELECT input.id, completed.job
FROM input LEFT JOIN completed ON completed.id = input.id AND completed.lease_token = input."leaseToken"`;

export interface CompleteManyResult {
  completed: Job[];
  /** Ids whose token no longer owned the job; those jobs were not changed. */
  stale: string[];
}

export async function completeMany(db: Queryable, completions: readonly Completion[]): Promise<CompleteManyResult> {
  if (completions.length === 0) return { completed: [], stale: [] };
  const rows = await db.query<{ id: string; job: Job | null }>({
    text: completeSql,
    params: [JSON.stringify(completions.map(({ id, leaseToken, result }) => ({ id, leaseToken, result: result ?? null })))],
  });
  return {
    completed: rows.flatMap((row) => (row.job ? [row.job] : [])),
    stale: rows.filter((row) => !row.job).map((row) => row.id),
  };
}

/** Completes one job; throws StaleLeaseError if its token no longer owns it. */
export async function complete(db: Queryable, completion: Completion): Promise<Job> {
  const { completed, stale } = await completeMany(db, [completion]);
  if (stale.length > 0) throw new StaleLeaseError(stale);
  return completed[0]!;
}

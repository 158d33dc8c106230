import type { Queryable } from '../db/types.js';
import { UuidArray } from '../db/uuid-array.js';
import { StaleLeaseError } from './errors.js';
import { toJob } from './job-json.js';
import type { AttemptTiming, Job, Json, Lease } from './types.js';

export interface Completion extends Lease, AttemptTiming {
  result?: Json;
}

/**
 * Completes many jobs in one statement (skiplock.complete_jobs): each leaves
 * the queue for the history. A job completes only while its token owns it,
 * so a worker whose lease was taken over cannot complete it: exactly-once
 * completion on top of at-least-once delivery.
 */
const completeSql = /* sql */ `SELECT * FROM skiplock.complete_jobs($1::uuid[], $2::uuid[], $3::float8[], $4::jsonb, $5::boolean)`;

export interface CompleteManyResult {
  /** Ids of the jobs this call completed. */
  completed: string[];
  /** Ids whose token no longer owned the job; those jobs were not changed. */
  stale: string[];
}

/** The completed jobs only, each with its token: a completion whose token was stale is not among them. */
async function runCompletions(db: Queryable, completions: readonly Completion[], withJobs: boolean) {
  return db.query<Lease & { job: Job | null }>({
    name: 'skiplock_complete',
    text: completeSql,
    params: [
      new UuidArray(completions.map((completion) => completion.id)),
      new UuidArray(completions.map((completion) => completion.leaseToken)),
      completions.map((completion) => completion.heldMs ?? null),
      // Most handlers return nothing: then no results to send or read.
      completions.some((completion) => completion.result !== undefined && completion.result !== null)
        ? JSON.stringify(completions.map((completion) => completion.result ?? null))
        : null,
      withJobs,
    ],
  });
}

/** Completes a batch in one statement (the drain's group commit); reports which were stale. */
export async function completeMany(db: Queryable, completions: readonly Completion[]): Promise<CompleteManyResult> {
  if (completions.length === 0) return { completed: [], stale: [] };
  const rows = await runCompletions(db, completions, false);
  const done = new Set(rows.map(leaseKey));
  return {
    completed: rows.map((row) => row.id),
    stale: completions.filter((completion) => !done.has(leaseKey(completion))).map((completion) => completion.id),
  };
}

/** A lease as one string: the same job can appear under a stale token and its current one. */
function leaseKey({ id, leaseToken }: Lease): string {
  return `${id} ${leaseToken}`;
}

/** Completes one job and returns it; throws StaleLeaseError if its token no longer owns it. */
export async function complete(db: Queryable, completion: Completion): Promise<Job> {
  const [row] = await runCompletions(db, [completion], true);
  if (row === undefined) throw new StaleLeaseError([completion.id]);
  return toJob(row.job!);
}

import type { Queryable } from '../db/types.js';
import { FINISHED_MATCHES, LIVE_MATCHES } from './bulk-filter.js';
import type { JobStatus } from './types.js';

/**
 * A bulk action's dry run: the jobs after the id $2 that match the filter $1
 * and are in a state the action acts on ($3 of the live table, $4 of the
 * history), up to $5 per table (no cap when null), counted by status. An
 * action reaches one table, so the cap is the action's limit.
 */
const countSql = /* sql */ `
SELECT status, count(*)::integer AS jobs FROM (
  (SELECT skiplock.job_status(j.state, j.run_at) AS status FROM skiplock.jobs j
   WHERE cardinality($3::text[]) > 0 AND j.id > $2::uuid AND j.state = ANY ($3::text[]) AND ${LIVE_MATCHES}
   LIMIT $5)
  UNION ALL
  (SELECT f.state FROM skiplock.finished_jobs f
   WHERE cardinality($4::text[]) > 0 AND f.id > $2::uuid AND f.state = ANY ($4::text[]) AND ${FINISHED_MATCHES}
   LIMIT $5)
) matching
GROUP BY status`;

export async function countMatching(
  db: Queryable,
  count: {
    filter: string;
    after: string;
    liveStates: readonly string[];
    finishedStates: readonly string[];
    limit?: number;
  },
): Promise<Partial<Record<JobStatus, number>>> {
  const rows = await db.query<{ status: JobStatus; jobs: number }>({
    name: 'skiplock_bulk_count',
    text: countSql,
    params: [count.filter, count.after, count.liveStates, count.finishedStates, count.limit ?? null],
  });
  return Object.fromEntries(rows.map((row) => [row.status, row.jobs]));
}

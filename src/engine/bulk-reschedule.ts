import type { Queryable } from '../db/types.js';
import { type BatchOutcome, LIVE_MATCHES } from './bulk-filter.js';

/**
 * One batch of a bulk reschedule: up to $3 waiting (or held) jobs after the
 * id $2 in id order, matching the filter $1, given the priority $4 and the
 * start time $5 (or $6 seconds from now), as skiplock.reschedule() changes
 * one, with its `rescheduled` event. Running and parked jobs are left alone
 * (a parked job's time is when its durable step wakes), as is a job whose
 * new time is at or past its expiry: both count as matched, not changed.
 */
const rescheduleBatchSql = /* sql */ `WITH target AS MATERIALIZED (
  SELECT j.id, j.priority, j.run_at, j.expires_at,
         coalesce($4::smallint, j.priority) AS new_priority,
         CASE WHEN $5::timestamptz IS NULL AND $6::float8 IS NULL THEN j.run_at
              ELSE greatest(coalesce($5::timestamptz, now() + make_interval(secs => $6::float8)), now()) END AS new_run_at
  FROM skiplock.jobs j
  WHERE j.id > $2::uuid AND j.state IN ('scheduled', 'queued', 'retrying', 'held') AND ${LIVE_MATCHES}
  ORDER BY j.id
  LIMIT $3
  FOR UPDATE SKIP LOCKED
),
changed AS (
  UPDATE skiplock.jobs j
  SET priority = t.new_priority,
      run_at = t.new_run_at,
      state = CASE WHEN ($5::timestamptz IS NULL AND $6::float8 IS NULL) OR j.state IN ('retrying', 'held') THEN j.state
                   WHEN t.new_run_at > now() THEN 'scheduled' ELSE 'queued' END
  FROM target t
  WHERE j.id = t.id AND (t.expires_at IS NULL OR t.new_run_at < t.expires_at)
  RETURNING j.id, j.attempts
),
events AS (
  INSERT INTO skiplock.job_events (job_id, kind, attempt, detail)
  SELECT c.id, 'rescheduled', c.attempts,
         jsonb_build_object('from', jsonb_build_object('priority', t.priority, 'runAt', skiplock.iso(t.run_at)),
                            'to', jsonb_build_object('priority', t.new_priority, 'runAt', skiplock.iso(t.new_run_at)),
                            'bulk', 'reschedule')
  FROM changed c JOIN target t ON t.id = c.id
)
SELECT (SELECT count(*) FROM target)::integer AS matched,
       (SELECT count(*) FROM changed)::integer AS changed,
       (SELECT t.id FROM target t ORDER BY t.id DESC LIMIT 1) AS last_id`;

export async function rescheduleBatch(
  db: Queryable,
  batch: { filter: string; after: string; size: number; priority?: number; runAt?: string; delaySeconds?: number },
): Promise<BatchOutcome> {
  const [row] = await db.query<BatchOutcome>({
    name: 'skiplock_bulk_reschedule_batch',
    text: rescheduleBatchSql,
    params: [
      batch.filter,
      batch.after,
      batch.size,
      batch.priority ?? null,
      batch.runAt ?? null,
      batch.delaySeconds ?? null,
    ],
  });
  return row!;
}

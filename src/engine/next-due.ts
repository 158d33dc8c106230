import { WAITING_STATE } from './waiting-state.js';
import type { Queryable } from '../db/types.js';

/**
 * The earliest moment a drain could find work, read from the state the
 * queue is in: a waiting job of one of the drain's types (or of a queue it
 * delivers) coming due, in a queue not paused (nor at its rate limit: when
 * its window next has room), a parked job's time (its sleep's end, its wait's
 * timeout), a lease running out (reaping), a waiting job or a
 * dedup window expiring, a rate key's window having room for held jobs, a periodic schedule's tick, an event or a day of
 * history past the retention (and summed by the statistics' rollup, which
 * reads an hour five minutes after it ends), and tomorrow's partition to
 * make. Read once at the end of a drain, so a scheduler can let the queue
 * (and its database) rest until then.
 */
const nextDueSql = /* sql */ `
SELECT least(
  (SELECT min(run_at) FROM skiplock.jobs
    WHERE ${WAITING_STATE}
      AND (type = ANY ($1::text[])
           OR queue IN (SELECT name FROM skiplock.queues WHERE delivery->>'target' = ANY ($3::text[])))
      AND queue NOT IN (SELECT name FROM skiplock.queues q WHERE q.paused_at IS NOT NULL
                        OR skiplock.window_starts(q.starts, q.rate_seconds, now()) >= q.rate_limit)),
  -- A queue at its rate limit: when its window next has room (a few queues, read without their jobs).
  (SELECT min(skiplock.window_opens_at(q.starts, q.rate_seconds, now())) FROM skiplock.queues q
    WHERE q.paused_at IS NULL AND skiplock.window_starts(q.starts, q.rate_seconds, now()) >= q.rate_limit),
  -- Parked jobs of every type: a claim of any type wakes them.
  (SELECT min(run_at) FROM skiplock.jobs WHERE state = 'parked'),
  (SELECT min(lease_expires_at) FROM skiplock.jobs WHERE state = 'running'),
  (SELECT min(expires_at) FROM skiplock.jobs
    WHERE expires_at IS NOT NULL AND ${WAITING_STATE}),
  (SELECT min(expires_at) FROM skiplock.dedup_keys WHERE expires_at IS NOT NULL),
  -- A rate key's window having room for its held jobs: a claim of any type gives them turns.
  (SELECT min(refill_at) FROM skiplock.concurrency_keys WHERE refill_at IS NOT NULL),
  (SELECT min(next_run_at) FROM skiplock.schedules WHERE enabled),
  (SELECT greatest(at + make_interval(secs => $2::float8), date_trunc('hour', at, 'UTC') + interval '65 minutes')
    FROM skiplock.job_events ORDER BY id LIMIT 1),
  date_trunc('day', now()) + interval '1 day'
) AS due_at`;

/**
 * When a drain of `types`, delivering to `deliveryTargets`, next has
 * something to do (a time in the past when it has now). `retentionSeconds`
 * is the history's retention.
 */
export async function nextDueAt(
  db: Queryable,
  options: { types: readonly string[]; deliveryTargets?: readonly string[]; retentionSeconds: number },
): Promise<Date> {
  const [row] = await db.query<{ due_at: Date | string }>({
    name: 'skiplock_next_due_at',
    text: nextDueSql,
    params: [options.types, options.retentionSeconds, options.deliveryTargets ?? []],
  });
  return new Date(row!.due_at);
}

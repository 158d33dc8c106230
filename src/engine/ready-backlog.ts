import { WAITING_STATE } from './waiting-state.js';
import type { Queryable } from '../db/types.js';

/**
 * Waiting jobs of `types`, or of queues delivered to one of
 * `deliveryTargets`, that could start now, counted up to `limit`: a
 * drain that finds a full claim asks this to decide how many helpers to
 * start. Bounded, so a backlog of millions costs what a backlog of `limit`
 * does (a walk of the waiting index).
 */
const readyBacklogSql = /* sql */ `
SELECT count(*)::int AS ready FROM (
  SELECT 1 FROM skiplock.jobs
   WHERE ${WAITING_STATE} AND run_at <= now()
     AND (type = ANY ($1::text[])
          OR queue IN (SELECT name FROM skiplock.queues WHERE delivery->>'target' = ANY ($3::text[])))
   LIMIT $2
) AS ready_jobs`;

/** How many jobs of `types` (or of queues delivered to `deliveryTargets`) could start now, up to `limit`. */
export async function readyBacklog(
  db: Queryable,
  options: { types: readonly string[]; deliveryTargets?: readonly string[]; limit: number },
): Promise<number> {
  const [row] = await db.query<{ ready: number }>({
    name: 'skiplock_ready_backlog',
    text: readyBacklogSql,
    params: [options.types, options.limit, options.deliveryTargets ?? []],
  });
  return row!.ready;
}

import type { Queryable } from '../db/types.js';
import type { TenantScope } from './read-jobs.js';

/** Jobs of one queue that finished in one minute. */
export interface ThroughputRow {
  queue: string;
  /** The minute's start, ISO-8601 UTC. */
  minute: string;
  succeeded: number;
  failed: number;
}

/**
 * Finished jobs per queue and minute over the last hour, for the dashboard's
 * charts. Only minutes with a finished job have a row. Reads the last hour
 * of the history through its BRIN index on finished_at, so a long retention
 * does not slow it down.
 */
const throughputSql = /* sql */ `SELECT queue, skiplock.iso(date_trunc('minute', finished_at)) AS minute,
       count(*) FILTER (WHERE state = 'succeeded')::integer AS succeeded,
       count(*) FILTER (WHERE state = 'failed')::integer AS failed
FROM skiplock.finished_jobs
WHERE state IN ('succeeded', 'failed') AND finished_at > now() - interval '1 hour'
  AND ($1::text IS NULL OR tenant = $1)
GROUP BY 1, 2
ORDER BY 1, 2`;

export async function throughputLastHour(db: Queryable, scope: TenantScope = {}): Promise<ThroughputRow[]> {
  return db.query<ThroughputRow>({
    name: 'skiplock_throughput',
    text: throughputSql,
    params: [scope.tenant ?? null],
  });
}

import { WAITING_STATE } from './waiting-state.js';
import type { Queryable } from '../db/types.js';
import type { TenantScope } from './read-jobs.js';

/** How far back `expiredLeasesReaped` counts. */
export const REAPED_WINDOW_SECONDS = 3600;

export interface TableDeadTuples {
  /** A table of the skiplock schema, e.g. `jobs`. */
  table: string;
  deadTuples: number;
  liveTuples: number;
  /** When (auto)vacuum last finished on it, ISO-8601 UTC, or null when never since the stats reset. */
  lastVacuumAt: string | null;
}

/** Early signs of trouble: a queue falling behind, workers dying, vacuum held back. */
export interface QueueHealth {
  /** Seconds the oldest ready job has waited, or null when none waits. */
  oldestWaitingSeconds: number | null;
  /** Jobs whose lease ran out (their worker died or hung) and were handed back, in the last REAPED_WINDOW_SECONDS. */
  expiredLeasesReaped: number;
  /** Dead row versions per queue table (pg_stat_user_tables): they grow while vacuum is held back. */
  deadTuples: TableDeadTuples[];
  /**
   * Age in seconds of the oldest transaction in this database that holds a
   * snapshot (pg_stat_activity.backend_xmin): vacuum cannot remove rows that
   * died after it started. Null when none, or when this role may not see it.
   */
  oldestSnapshotSeconds: number | null;
  /** That transaction's backend pid, to find it (and end it) in pg_stat_activity. */
  oldestSnapshotPid: number | null;
}

/**
 * One statement reading the queue's health. The waiting age and the reaped
 * count follow the caller's tenant scope; dead tuples and the oldest snapshot
 * are the database's own, alike for every tenant. The reaped count reads the
 * job_events index on `at`; our own backend (which holds a snapshot while it
 * runs this) is left out of the oldest-snapshot search.
 */
const queueHealthSql = /* sql */ `
SELECT
  (SELECT extract(epoch FROM now() - min(run_at))::float8
     FROM skiplock.jobs
    WHERE ${WAITING_STATE} AND run_at <= now()
      AND ($1::text IS NULL OR tenant = $1)) AS "oldestWaitingSeconds",
  (SELECT count(*)::integer
     FROM skiplock.job_events e
    WHERE e.kind = 'lease_expired' AND e.at > now() - make_interval(secs => $2)
      AND ($1::text IS NULL OR EXISTS (SELECT 1 FROM skiplock.all_jobs a WHERE a.id = e.job_id AND a.tenant = $1))
  ) AS "expiredLeasesReaped",
  (SELECT coalesce(jsonb_agg(jsonb_build_object(
            'table', relname, 'deadTuples', n_dead_tup, 'liveTuples', n_live_tup,
            'lastVacuumAt', skiplock.iso(greatest(last_vacuum, last_autovacuum)))
          ORDER BY relname), '[]'::jsonb)
     FROM pg_stat_user_tables WHERE schemaname = 'skiplock') AS "deadTuples",
  oldest.seconds AS "oldestSnapshotSeconds",
  oldest.pid AS "oldestSnapshotPid"
FROM (SELECT NULL) AS one
LEFT JOIN LATERAL (
  -- clock_timestamp(), not now(): a transaction that began after this one's
  -- start would otherwise be of a negative age.
  SELECT extract(epoch FROM clock_timestamp() - coalesce(xact_start, query_start))::float8 AS seconds, pid
    FROM pg_stat_activity
   WHERE backend_xmin IS NOT NULL AND datname = current_database() AND pid <> pg_backend_pid()
   ORDER BY age(backend_xmin) DESC
   LIMIT 1
) AS oldest ON true`;

export async function queueHealth(db: Queryable, scope: TenantScope = {}): Promise<QueueHealth> {
  const [row] = await db.query<QueueHealth>({
    name: 'skiplock_queue_health',
    text: queueHealthSql,
    params: [scope.tenant ?? null, REAPED_WINDOW_SECONDS],
  });
  return row!;
}

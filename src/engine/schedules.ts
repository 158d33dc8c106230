import type { Queryable } from '../db/types.js';
import type { Json } from './types.js';

/** A periodic job as stored in skiplock.schedules. */
export interface ScheduleInput {
  name: string;
  /** Cron expression (5 fields, or 6 with seconds first). */
  cron: string;
  /** IANA time zone the expression is read in. */
  timezone: string;
  queue: string;
  type: string;
  tenant: string;
  payload: Json;
  /** Priority of the jobs it enqueues. */
  priority: number;
  /** The first tick, computed by the caller from the expression. */
  nextRunAt: string;
}

/**
 * Creates or updates schedules. A schedule whose expression or time zone
 * changed starts over from the new first tick; an unchanged one keeps its
 * next tick (re-registering never skips or repeats one) and is not written
 * at all. `enabled` stays as an operator set it.
 */
const upsertSchedulesSql = /* sql */ `
INSERT INTO skiplock.schedules AS s (name, cron, timezone, queue, type, tenant, payload, options, next_run_at)
SELECT name, cron, timezone, queue, type, tenant, coalesce(payload, 'null'), jsonb_build_object('priority', priority),
       "nextRunAt"
FROM jsonb_to_recordset($1::jsonb) AS x(name text, cron text, timezone text, queue text, type text, tenant text,
                                        payload jsonb, priority integer, "nextRunAt" timestamptz)
ON CONFLICT (name) DO UPDATE
SET cron = EXCLUDED.cron, timezone = EXCLUDED.timezone, queue = EXCLUDED.queue, type = EXCLUDED.type,
    tenant = EXCLUDED.tenant, payload = EXCLUDED.payload, options = EXCLUDED.options,
    next_run_at = CASE WHEN (s.cron, s.timezone) = (EXCLUDED.cron, EXCLUDED.timezone) THEN s.next_run_at
                       ELSE EXCLUDED.next_run_at END
WHERE (s.cron, s.timezone, s.queue, s.type, s.tenant, s.payload, s.options)
      IS DISTINCT FROM (EXCLUDED.cron, EXCLUDED.timezone, EXCLUDED.queue, EXCLUDED.type, EXCLUDED.tenant,
                        EXCLUDED.payload, EXCLUDED.options)`;

export async function upsertSchedules(db: Queryable, schedules: readonly ScheduleInput[]): Promise<void> {
  if (schedules.length === 0) return;
  await db.query({
    name: 'skiplock_upsert_schedules',
    text: upsertSchedulesSql,
    params: [JSON.stringify(schedules)],
  });
}

export interface DueSchedule {
  name: string;
  cron: string;
  timezone: string;
  /** The tick that is due, exactly as stored: hand it back unchanged to `advanceSchedules`. */
  dueAt: string;
  /** The same tick as ISO-8601, for computing the next one. */
  dueAtIso: string;
  /** The database's clock, so the next tick does not depend on this machine's. */
  now: string;
}

// dueAt is the stored value as text (full microsecond precision), because the
// compare-and-set in advanceSchedules must match it exactly.
const dueSchedulesSql = /* sql */ `
SELECT name, cron, timezone, next_run_at::text AS "dueAt", skiplock.iso(next_run_at) AS "dueAtIso",
       skiplock.iso(now()) AS now
FROM skiplock.schedules
WHERE enabled AND next_run_at <= now()
ORDER BY next_run_at
LIMIT $1`;

/** Enabled schedules whose next tick has come, oldest first. */
export async function listDueSchedules(db: Queryable, options: { limit?: number } = {}): Promise<DueSchedule[]> {
  return db.query<DueSchedule>({
    name: 'skiplock_due_schedules',
    text: dueSchedulesSql,
    params: [options.limit ?? 100],
  });
}

export interface ScheduleTick {
  name: string;
  /** `dueAt` as listDueSchedules returned it. */
  dueAt: string;
  /** The tick after this one (ISO-8601), or 'infinity' when the expression has no more. */
  nextRunAt: string;
}

/**
 * Enqueues one job per due tick and moves each schedule to its next tick, in
 * one statement. The UPDATE is a compare-and-set on next_run_at: when two
 * drains race for a tick, the second waits for the first's row lock, finds
 * next_run_at moved on, and updates (and so enqueues) nothing. The jobs take
 * the table's defaults; the drain applies each job type's own options.
 */
const advanceSchedulesSql = /* sql */ `
WITH tick AS (
  SELECT * FROM jsonb_to_recordset($1::jsonb) AS x(name text, "dueAt" timestamptz, "nextRunAt" timestamptz)
),
advanced AS (
  UPDATE skiplock.schedules s
  SET next_run_at = tick."nextRunAt", last_run_at = s.next_run_at
  FROM tick
  WHERE s.name = tick.name AND s.next_run_at = tick."dueAt" AND s.enabled
  RETURNING s.queue, s.type, s.tenant, s.payload, s.options, s.last_run_at
),
enqueued AS (
  INSERT INTO skiplock.jobs (queue, type, tenant, payload, priority, run_at)
  SELECT queue, type, tenant, payload, coalesce((options->>'priority')::smallint, 0), last_run_at FROM advanced
  RETURNING id
)
SELECT count(*)::integer AS enqueued FROM enqueued`;

/** Returns how many jobs were enqueued: the ticks this caller won. */
export async function advanceSchedules(db: Queryable, ticks: readonly ScheduleTick[]): Promise<number> {
  if (ticks.length === 0) return 0;
  const [row] = await db.query<{ enqueued: number }>({
    name: 'skiplock_advance_schedules',
    text: advanceSchedulesSql,
    params: [JSON.stringify(ticks)],
  });
  return row?.enqueued ?? 0;
}

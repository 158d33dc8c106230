import type { Queryable } from '../../../src/db/types';

/** One run of a job: from its claim to what ended it (Infinity: still running). */
export interface Run {
  jobId: string;
  tenant: string;
  workerId: string | null;
  startMs: number;
  endMs: number;
  /** The event that ended it, or null while it runs. */
  endedBy: string | null;
}

export interface RunHistory {
  runs: Run[];
  /** Jobs with a claim while an earlier run of theirs had not ended: run twice at once. */
  runTwiceAtOnce: string[];
}

/**
 * Every run of every job: an attempt that ended with an event (failed,
 * released, lease expired, cancelled), which records when it started, and
 * the last attempt of a job that runs now or succeeded, from its row. Times
 * are the wall clock when each statement wrote them, and a job can only be
 * claimed again after the statement that ended its run committed, so in a
 * correct history no run of a job starts before the one before it ended.
 */
const runsSql = /* sql */ `
SELECT a.id AS "jobId", a.tenant, e.worker_id AS "workerId", e.kind AS "endedBy",
       extract(epoch FROM (e.detail->>'startedAt')::timestamptz)::float8 * 1000 AS "startMs",
       extract(epoch FROM e.at)::float8 * 1000 AS "endMs"
FROM skiplock.job_events e
JOIN skiplock.all_jobs a ON a.id = e.job_id
WHERE e.detail->>'startedAt' IS NOT NULL
UNION ALL
SELECT a.id, a.tenant, a.worker_id, CASE WHEN a.state = 'succeeded' THEN 'completed' END,
       extract(epoch FROM a.started_at)::float8 * 1000,
       CASE WHEN a.state = 'succeeded' THEN extract(epoch FROM a.finished_at)::float8 * 1000 ELSE 'Infinity' END
FROM skiplock.all_jobs a
WHERE a.state IN ('running', 'succeeded')
  AND NOT EXISTS (SELECT 1 FROM skiplock.job_events e
                  WHERE e.job_id = a.id AND (e.detail->>'startedAt')::timestamptz = a.started_at)
ORDER BY 1, 5`;

export async function runHistory(db: Queryable): Promise<RunHistory> {
  const runs = await db.query<Run>({ text: runsSql, params: [] });
  const twice = new Set<string>();
  runs.forEach((run, i) => {
    const before = runs[i - 1];
    if (before?.jobId === run.jobId && run.startMs < before.endMs) twice.add(run.jobId);
  });
  return { runs, runTwiceAtOnce: [...twice] };
}

/** The most runs of each tenant (or any group named in its place) at the same moment, from the run intervals. */
export function peakConcurrency(runs: readonly Pick<Run, 'tenant' | 'startMs' | 'endMs'>[]): Map<string, number> {
  const edges = runs.flatMap((run) => [
    { tenant: run.tenant, atMs: run.startMs, delta: 1 },
    { tenant: run.tenant, atMs: run.endMs, delta: -1 },
  ]);
  // At the same instant an end frees its slot before a start takes one.
  edges.sort((a, b) => a.atMs - b.atMs || a.delta - b.delta);
  const now = new Map<string, number>();
  const peak = new Map<string, number>();
  for (const edge of edges) {
    const running = (now.get(edge.tenant) ?? 0) + edge.delta;
    now.set(edge.tenant, running);
    peak.set(edge.tenant, Math.max(peak.get(edge.tenant) ?? 0, running));
  }
  return peak;
}

/** Jobs per state, e.g. `{ succeeded: 980, running: 20 }`. */
export async function jobStates(db: Queryable): Promise<Record<string, number>> {
  const rows = await db.query<{ state: string; count: number }>({
    text: 'SELECT state, count(*)::integer AS count FROM skiplock.all_jobs GROUP BY state',
    params: [],
  });
  return Object.fromEntries(rows.map((row) => [row.state, row.count]));
}

/** How many jobs there are in total, and how many ended as succeeded. */
export async function settledCount(db: Queryable): Promise<{ total: number; succeeded: number }> {
  const states = await jobStates(db);
  const total = Object.values(states).reduce((sum, count) => sum + count, 0);
  return { total, succeeded: states.succeeded ?? 0 };
}

/** Waits until every job has succeeded, or until `timeoutMs`; returns what it saw last. */
export async function untilAllSucceeded(
  db: Queryable,
  timeoutMs: number,
): Promise<{ total: number; succeeded: number }> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const counts = await settledCount(db);
    if (counts.succeeded === counts.total || Date.now() > deadline) return counts;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/** Drains again and again until every job has succeeded (the test's timeout bounds it); returns the counts. */
export async function drainUntilAllSucceeded(
  db: Queryable,
  drainOnce: () => Promise<unknown>,
): Promise<{ total: number; succeeded: number }> {
  for (;;) {
    const counts = await settledCount(db);
    if (counts.succeeded === counts.total) return counts;
    await drainOnce();
  }
}

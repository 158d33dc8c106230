import type { Queryable } from '../../../src/db/types';

/** One run of a job: from its claim to the event that ended it (Infinity: still running). */
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

const RUN_ENDS = ['completed', 'released', 'failed', 'cancelled', 'lease_expired'];

/**
 * Every claim and the event that ended it, per job, in time order. `at` is the
 * wall clock when the event row was written, and a job can only be claimed
 * again after the statement that ended its run committed, so in a correct
 * history each claim comes after the end of the run before it.
 */
const eventsSql = /* sql */ `
SELECT e.job_id AS "jobId", j.tenant, e.kind, e.worker_id AS "workerId",
       extract(epoch FROM e.at)::float8 * 1000 AS "atMs"
FROM skiplock.job_events e
JOIN skiplock.jobs j ON j.id = e.job_id
WHERE e.kind = 'claimed' OR e.kind = ANY($1::text[])
ORDER BY e.job_id, e.at, e.id`;

interface EventRow {
  jobId: string;
  tenant: string;
  kind: string;
  workerId: string | null;
  atMs: number;
}

export async function runHistory(db: Queryable): Promise<RunHistory> {
  const events = await db.query<EventRow>({ text: eventsSql, params: [RUN_ENDS] });
  const runs: Run[] = [];
  const twice = new Set<string>();
  let open: Run | undefined;
  for (const event of events) {
    if (open !== undefined && open.jobId !== event.jobId) {
      runs.push(open);
      open = undefined;
    }
    if (event.kind === 'claimed') {
      if (open !== undefined) {
        twice.add(event.jobId);
        runs.push(open);
      }
      const { jobId, tenant, workerId, atMs } = event;
      open = { jobId, tenant, workerId, startMs: atMs, endMs: Number.POSITIVE_INFINITY, endedBy: null };
    } else if (open !== undefined) {
      runs.push({ ...open, endMs: event.atMs, endedBy: event.kind });
      open = undefined;
    }
  }
  if (open !== undefined) runs.push(open);
  return { runs, runTwiceAtOnce: [...twice] };
}

/** The most runs of each tenant at the same moment, from the run intervals. */
export function peakConcurrency(runs: readonly Run[]): Map<string, number> {
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
    text: 'SELECT state, count(*)::integer AS count FROM skiplock.jobs GROUP BY state',
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

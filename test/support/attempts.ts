import type { Db, Queryable } from '../../src/db/types';
import { claimBatch, enqueueBatch, failMany } from '../../src/engine';

/**
 * Claims every ready job of the queue and backdates its claim, and its due
 * time, by `claimedAgoMs`: ended now, each attempt ran that long (less what
 * its worker says it held the job) after no wait.
 */
export async function claimStartedAgo(db: Db, queue: string, claimedAgoMs: number) {
  const jobs = await claimBatch(db, { max: 100, workerId: 'w', queues: [queue] });
  await db.query({
    // Dated from now rather than from the claim, so the time the claim took counts neither as wait nor as run.
    text: `UPDATE skiplock.jobs SET started_at = backdated.at, run_at = backdated.at
           FROM (SELECT clock_timestamp() - make_interval(secs => $2::float8 / 1000) AS at) backdated
           WHERE id = ANY($1::uuid[])`,
    params: [jobs.map((job) => job.id), claimedAgoMs],
  });
  return jobs;
}

/** Moves the attempts that ended in the last minute (finished jobs and events) `days` days back, and the rollup to before them. */
export async function endedDaysAgo(db: Db, days: number): Promise<void> {
  await db.query({
    text: `UPDATE skiplock.finished_jobs SET finished_at = finished_at - make_interval(days => $1),
             started_at = started_at - make_interval(days => $1), run_at = run_at - make_interval(days => $1)
           WHERE finished_at > now() - interval '1 minute'`,
    params: [days],
  });
  // Events are append-only; a test may rewrite their time with the guard off.
  await db.query({ text: 'ALTER TABLE skiplock.job_events DISABLE TRIGGER job_events_append_only', params: [] });
  await db.query({
    text: "UPDATE skiplock.job_events SET at = at - make_interval(days => $1) WHERE at > now() - interval '1 minute'",
    params: [days],
  });
  await db.query({ text: 'ALTER TABLE skiplock.job_events ENABLE TRIGGER job_events_append_only', params: [] });
  await db.query({
    text: 'UPDATE skiplock.attempt_stats_rollup SET rolled_through = least(rolled_through, now() - make_interval(days => $1 + 1))',
    params: [days],
  });
}

/** Enqueues `count` jobs (queue `q`, type `t` unless said) and fails each for good at its one attempt; answers their ids. */
export async function failedJobs(
  db: Queryable,
  count: number,
  fields: { queue?: string; tenant?: string; type?: string } = {},
): Promise<string[]> {
  const queue = fields.queue ?? 'q';
  const jobs = Array.from({ length: count }, () => ({
    queue,
    tenant: fields.tenant,
    type: fields.type ?? 't',
    maxAttempts: 1,
  }));
  for (let at = 0; at < jobs.length; at += 1000) await enqueueBatch(db, jobs.slice(at, at + 1000));
  const ids: string[] = [];
  for (;;) {
    const claimed = await claimBatch(db, { max: 1000, workerId: 'w', queues: [queue] });
    if (claimed.length === 0) return ids;
    ids.push(...claimed.map((job) => job.id));
    await failMany(
      db,
      claimed.map((job) => ({ id: job.id, leaseToken: job.leaseToken, error: { message: 'boom' } })),
    );
  }
}

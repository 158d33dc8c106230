import type { Db } from '../../src/db/types';
import { claimBatch } from '../../src/engine';

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

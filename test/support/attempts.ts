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
    text: `UPDATE skiplock.jobs SET started_at = started_at - make_interval(secs => $2::float8 / 1000),
                                    run_at = run_at - make_interval(secs => $2::float8 / 1000)
           WHERE id = ANY($1::uuid[])`,
    params: [jobs.map((job) => job.id), claimedAgoMs],
  });
  return jobs;
}

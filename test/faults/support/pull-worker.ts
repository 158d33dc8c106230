/**
 * A pull worker as another language would write one against the pull API:
 * claim a few jobs of the types it knows with a lease, work, acknowledge them
 * with their lease tokens. It runs the engine's statements that the HTTP pull
 * routes run. Killed with SIGKILL by the crash scenario, it releases nothing.
 * Environment: DATABASE_URL, WORKER_ID, PULL_TYPES (comma-separated),
 * LEASE_SECONDS, WORK_MS.
 */
import { pgDb } from '../../../src/db/pg';
import { sleep } from '../../../src/engine/sleep';
import { claimBatch, completeMany } from '../../../src/engine';

const db = pgDb(process.env.DATABASE_URL!, { max: 1 });
const workerId = process.env.WORKER_ID!;
const types = process.env.PULL_TYPES!.split(',');
const leaseSeconds = Number(process.env.LEASE_SECONDS ?? 2);
const workMs = Number(process.env.WORK_MS ?? 50);

for (;;) {
  try {
    const jobs = await claimBatch(db, { max: 4, workerId, types, leaseSeconds });
    if (jobs.length === 0) {
      await sleep(50);
      continue;
    }
    await sleep(workMs);
    await completeMany(db, jobs);
  } catch (error) {
    // The database went away for a moment: what was claimed comes back when its lease ends.
    console.error(`${workerId}: ${(error as Error).message}`);
    await sleep(200);
  }
}

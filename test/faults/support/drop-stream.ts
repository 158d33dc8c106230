import type { Db, Queryable } from '../../../src/db/types';
import { enqueue, type EnqueueInput } from '../../../src/engine';
import { sleep } from '../../../src/engine/sleep';

/** How long the 'drop' scenarios (17 and 19) stream their jobs, and how often. */
export const DROP_STREAM_MS = 2500;
export const DROP_EVERY_MS = 10;

/**
 * A steady stream far above a 'drop' limit's rate: every few milliseconds,
 * the jobs `tick` gives, one enqueue at a time, in order, each with work of
 * 5 to 50 ms. Counts the enqueues and those answered dropped.
 */
export async function dropStream(
  db: Db,
  random: () => number,
  tick: (n: number) => readonly Omit<EnqueueInput, 'payload'>[],
): Promise<{ enqueued: number; answeredCancelled: number }> {
  let enqueued = 0;
  let answeredCancelled = 0;
  for (let n = 0, until = Date.now() + DROP_STREAM_MS; Date.now() < until; n++, await sleep(DROP_EVERY_MS)) {
    for (const input of tick(n)) {
      const { job } = await enqueue(db, {
        ...input,
        payload: { seq: enqueued, workMs: Math.round(5 + random() * 45) },
      });
      enqueued += 1;
      if (job.status === 'cancelled' && (job.lastError as { name?: string } | null)?.name === 'RateLimitedError') {
        answeredCancelled += 1;
      }
    }
  }
  return { enqueued, answeredCancelled };
}

/** Waits until no job is live, or the timeout passes; answers the live jobs left. */
export async function untilNoLiveJobs(db: Queryable, timeoutMs: number): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const [row] = await db.query<{ live: number }>({
      text: 'SELECT count(*)::integer AS live FROM skiplock.jobs',
      params: [],
    });
    if (row!.live === 0 || Date.now() > deadline) return row!.live;
    await sleep(100);
  }
}

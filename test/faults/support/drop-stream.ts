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

/** A dropping key's or queue's jobs by outcome, as a scenario's accounting query counts them. */
export interface DropOutcome {
  jobs: number;
  succeeded: number;
  cancelled: number;
  droppedAsSaid: number;
}

/** A dropped job with what its window held when it was dropped, as a scenario's drops query reads them. */
export interface JudgedDrop {
  limit: number;
  inWindow: number;
  letThroughUnstarted: number;
}

/**
 * The drop accounting both 'drop' scenarios check: the dropping keys' or
 * queues' outcomes summed, and the drops made while the window still had
 * room (judged by an upper bound: starts in the window plus the jobs let
 * through and not yet started must reach the limit).
 */
export async function dropAccounting<Drop extends JudgedDrop>(
  db: Queryable,
  outcomes: readonly (DropOutcome | undefined)[],
  dropsSql: string,
): Promise<{ jobs: number; cancelled: number; succeeded: number; explained: number; droppedWithRoom: Drop[] }> {
  const sum = (pick: (row: DropOutcome) => number) => outcomes.reduce((total, row) => total + (row ? pick(row) : 0), 0);
  const drops = await db.query<Drop>({ text: dropsSql, params: [] });
  return {
    jobs: sum((row) => row.jobs),
    cancelled: sum((row) => row.cancelled),
    succeeded: sum((row) => row.succeeded),
    explained: sum((row) => row.droppedAsSaid),
    droppedWithRoom: drops.filter((row) => row.inWindow + row.letThroughUnstarted < row.limit),
  };
}

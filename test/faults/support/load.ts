import type { Queryable } from '../../../src/db/types';
import { enqueueBatch, MAX_BATCH, type EnqueueInput } from '../../../src/engine';

/** Enqueues any number of jobs, a full batch per statement. */
export async function enqueueMany(db: Queryable, jobs: readonly EnqueueInput[]): Promise<void> {
  for (let i = 0; i < jobs.length; i += MAX_BATCH) await enqueueBatch(db, jobs.slice(i, i + MAX_BATCH));
}

/** `count` inputs made by `make(i)`. */
export function jobs(count: number, make: (i: number) => EnqueueInput): EnqueueInput[] {
  return Array.from({ length: count }, (_, i) => make(i));
}

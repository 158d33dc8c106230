import { env } from 'cloudflare:workers';
import { enqueue, getJob, getJobEvents, type EnqueueInput, type Job, type JobEventKind } from '../../../../src/engine';
import { httpDatabase } from '../../support/databases';

/** The Worker tests share one database: names of its own keep each test's rows apart. */
export function uniqueName(prefix: string): string {
  return `${prefix}-${crypto.randomUUID()}`;
}

export async function enqueueJob(input: Omit<EnqueueInput, 'queue'>): Promise<Job> {
  return (await enqueue(httpDatabase(env), { queue: uniqueName('drain-test'), ...input })).job;
}

export async function jobById(id: string): Promise<Job> {
  const job = await getJob(httpDatabase(env), id);
  if (job === undefined) throw new Error(`job ${id} does not exist`);
  return job;
}

export async function eventKinds(id: string): Promise<JobEventKind[]> {
  return (await getJobEvents(httpDatabase(env), id)).map((event) => event.kind);
}

const ENDS_A_CLAIM: readonly JobEventKind[] = ['completed', 'released', 'failed', 'lease_expired', 'cancelled'];

/** True when no two claims of the job overlapped: each ended before the next began. */
export function claimsNeverOverlap(kinds: readonly JobEventKind[]): boolean {
  let held = false;
  for (const kind of kinds) {
    if (kind === 'claimed') {
      if (held) return false;
      held = true;
    } else if (ENDS_A_CLAIM.includes(kind)) {
      held = false;
    }
  }
  return true;
}

/** Variables that turn on the demo jobs, as `npm start` does. */
export const DEV = { SKIPLOCK_DEV: '1' } as const;

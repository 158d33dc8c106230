/**
 * Parks jobs the way a drain does, minus the handler: each job is enqueued,
 * claimed and then parked by the engine's own step statements
 * (skiplock.sleep_step, wait_for_event, invoke_children), so the rows are
 * exactly what a sleeping, event-waiting or child-waiting job leaves:
 * state 'parked' with run_at at the sleep's end, the wait's timeout or
 * skiplock.until_woken() (a child-waiting job's child sleeps too), its job_steps, event_waits or job_links rows and
 * its 'parked' event. Each batch is enqueued, claimed and parked in one
 * transaction, so a drain running beside it (the Worker of bench:idle)
 * never sees the jobs ready and never runs them.
 */
import type { Queryable, SessionDb } from '../src/db/types';
import { claimBatch } from '../src/engine/claim-batch';
import { enqueueBatch, type EnqueueInput } from '../src/engine/enqueue';
import { invokeChildrenStep, sleepStep, waitForEventStep, type StepAnswer } from '../src/engine/steps';
import type { Lease } from '../src/engine/types';

export type ParkKind = 'sleep' | 'event' | 'children';

export interface ParkSpec {
  kind: ParkKind;
  count: number;
  /** The tenants and queue the jobs go to, round-robin. */
  tenants: readonly string[];
  queue: string;
  type: string;
  /** When a sleep ends and an event wait times out (children wait until woken). */
  until: Date;
  /** Children: their queue and type (each child sleeps until `until` too, so nothing wakes its parent). */
  child?: { queue: string; type: string };
}

const BATCH = 500;
const WORKER = 'bench-parker';

/** Parks `spec.count` jobs; returns how many parked (all, or it throws). */
export async function parkJobs(db: SessionDb, spec: ParkSpec, offset = 0): Promise<number> {
  let parked = 0;
  for (let start = 0; start < spec.count; start += BATCH) {
    const size = Math.min(BATCH, spec.count - start);
    const inputs: EnqueueInput[] = Array.from({ length: size }, (_, i) => {
      const n = offset + start + i;
      return {
        queue: spec.queue,
        type: spec.type,
        tenant: spec.tenants[n % spec.tenants.length]!,
        payload: { n, parked: spec.kind, text: 'a job that parks itself' },
      };
    });
    parked += await db.withTransaction(async (tx) => {
      const ids = new Set((await enqueueBatch(tx, inputs)).map((result) => result.job.id));
      const leases = await claimAll(tx, ids.size, spec.type);
      const stranger = leases.find((lease) => !ids.has(lease.id));
      if (stranger) throw new Error(`claimed a job that is not the parker's: ${stranger.id}`);
      let count = 0;
      for (const lease of leases) {
        const answer = await park(tx, lease, spec);
        if (answer.status !== 'parked') throw new Error(`job ${lease.id} did not park: ${JSON.stringify(answer)}`);
        count += 1;
      }
      if (spec.kind === 'children') await parkChildren(tx, size, spec);
      return count;
    });
  }
  return parked;
}

/** Claims as many jobs of `type` as `count` (a claim's share per tenant is bounded by fairness: claim until all are taken). */
async function claimAll(tx: Queryable, count: number, type: string): Promise<Lease[]> {
  const leases: Lease[] = [];
  for (let round = 0; leases.length < count && round < 50; round++) {
    const claimed = await claimBatch(tx, { max: 1000, workerId: WORKER, types: [type] });
    leases.push(...claimed.map((job) => ({ id: job.id, leaseToken: job.leaseToken })));
    if (claimed.length === 0) break;
  }
  if (leases.length !== count) throw new Error(`claimed ${leases.length} of ${count} jobs of ${type}`);
  return leases;
}

/** The children just invoked start and sleep until `spec.until`: parked jobs too, not jobs waiting to run. */
async function parkChildren(tx: Queryable, count: number, spec: ParkSpec): Promise<void> {
  for (const lease of await claimAll(tx, count, childOf(spec).type)) {
    const answer = await sleepStep(tx, lease, 'nap', spec.until);
    if (answer.status !== 'parked') throw new Error(`child ${lease.id} did not park: ${JSON.stringify(answer)}`);
  }
}

function childOf(spec: ParkSpec): { queue: string; type: string } {
  return spec.child ?? { queue: 'children', type: 'child' };
}

function park(tx: Queryable, lease: Lease, spec: ParkSpec): Promise<StepAnswer> {
  switch (spec.kind) {
    case 'sleep':
      return sleepStep(tx, lease, 'nap', spec.until);
    case 'event':
      return waitForEventStep(tx, lease, {
        name: 'approval',
        event: 'order.approved',
        key: `order-${lease.id}`,
        timeoutAt: spec.until,
        leaseSeconds: 60,
      });
    case 'children': {
      const child = childOf(spec);
      return invokeChildrenStep(tx, lease, [{ name: 'child-1', child: { queue: child.queue, type: child.type } }], 60);
    }
  }
}

/** What the parked jobs left, to show in a report: rows by state and run time, and the step tables' sizes. */
export async function parkedInventory(db: SessionDb): Promise<Record<string, number>> {
  const [row] = await db.query<Record<string, number>>({
    text: /* sql */ `
SELECT (SELECT count(*)::int FROM skiplock.jobs WHERE state = 'scheduled' AND run_at > now()) AS "scheduledInFuture",
       (SELECT count(*)::int FROM skiplock.jobs WHERE state = 'parked') AS "parked",
       (SELECT count(*)::int FROM skiplock.jobs WHERE run_at = skiplock.until_woken()) AS "untilWoken",
       (SELECT count(*)::int FROM skiplock.jobs WHERE state IN ('queued', 'retrying', 'running')) AS "notParked",
       (SELECT count(*)::int FROM skiplock.job_steps WHERE kind = 'sleep') AS "sleepSteps",
       (SELECT count(*)::int FROM skiplock.event_waits) AS "eventWaits",
       (SELECT count(*)::int FROM skiplock.job_links) AS "jobLinks",
       (SELECT count(*)::int FROM skiplock.job_events WHERE kind = 'parked') AS "parkedEvents"`,
    params: [],
  });
  return row!;
}

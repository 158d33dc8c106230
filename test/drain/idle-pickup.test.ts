import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { Db, Query, Row } from '../../src/db/types';
import { defineJob, type JobDefinition } from '../../src/drain/define-job';
import { createRegistry } from '../../src/drain/registry';
import { runUntilStopped } from '../../src/drain/run-until-stopped';
import { enqueue } from '../../src/engine';
import { engineDatabases } from '../support/engine-db';
import { waitFor } from '../support/wait-for';
import { eventKinds, gate, jobById, recordingLogger } from './support/drain';

const open = engineDatabases();

/**
 * The same database, with a hand on the claims: once `holdNext()` is called,
 * the next claim runs in Postgres as any other, but its answer reaches the
 * loop only when the test lets it go. So a claim is "still out" for as long
 * as the test needs.
 */
function heldClaims(db: Db) {
  let holdNext = false;
  const held: Array<() => void> = [];
  let answered = 0;
  let sent = 0;
  const claims: Db = {
    async query<R = Row>(query: Query) {
      if (query.name !== 'skiplock_claim_batch') return db.query<R>(query);
      sent += 1;
      const hold = holdNext;
      holdNext = false;
      const rows = await db.query<R>(query);
      answered += 1;
      if (hold) await new Promise<void>((resolve) => held.push(resolve));
      return rows;
    },
    transaction: (queries) => db.transaction(queries),
    close: () => db.close(),
  };
  return {
    db: claims,
    holdNext: () => {
      holdNext = true;
    },
    /** Claim statements sent. */
    sent: () => sent,
    /** Claims Postgres has answered, held or not. */
    answered: () => answered,
    held: () => held.length,
    letGo: () => {
      for (const resolve of held.splice(0)) resolve();
    },
  };
}

/** A waitForWork the test drives: `arrive()` is an enqueue's notification, counted as the worker's JobWakeups counts them. */
function arrivals() {
  const waiting = new Set<() => void>();
  let received = 0;
  return {
    notificationsReceived: () => received,
    waitForWork: (signal: AbortSignal) =>
      new Promise<void>((resolve) => {
        const wake = () => {
          waiting.delete(wake);
          resolve();
        };
        waiting.add(wake);
        signal.addEventListener('abort', wake, { once: true });
      }),
    waiters: () => waiting.size,
    arrive: () => {
      received += 1;
      for (const wake of [...waiting]) wake();
    },
    /** The poll interval running out: a wake with no notification. */
    poll: () => {
      for (const wake of [...waiting]) wake();
    },
  };
}

/** A worker of one slot for `job`, once it waits for work on an empty queue. */
async function idleWorker(
  db: Db,
  job: JobDefinition,
  claims: ReturnType<typeof heldClaims>,
  work: ReturnType<typeof arrivals>,
  { concurrency = 1, countingNotifications = false } = {},
) {
  const running = await runUntilStopped(db, createRegistry([job]), {
    workerId: 'idle-worker',
    concurrency,
    waitForWork: work.waitForWork,
    ...(countingNotifications ? { notificationsReceived: work.notificationsReceived } : {}),
    claimsDb: claims.db,
    housekeepingIntervalMs: 0,
    logger: recordingLogger(),
  });
  await waitFor('the worker to wait for work', () => work.waiters() > 0, { everyMs: 2 });
  return running;
}

/**
 * A job type whose first run waits until `finishFirst` opens; each run's job
 * id goes into `runs`, and the later runs call `afterFirst`.
 */
function firstRunHeld(afterFirst: () => void = () => {}) {
  const firstRunning = gate();
  const finishFirst = gate();
  const runs: string[] = [];
  const job = defineJob('pickup', z.unknown(), async (_payload, context) => {
    runs.push(context.job.id);
    if (runs.length === 1) {
      firstRunning.open();
      await finishFirst.opened;
    } else afterFirst();
  });
  return { job, runs, firstRunning, finishFirst };
}

/** Announces work, and holds out the claim that answers it, until the worker listens again beside it. */
async function announceWithClaimHeld(
  claims: ReturnType<typeof heldClaims>,
  work: ReturnType<typeof arrivals>,
): Promise<void> {
  claims.holdNext();
  const before = claims.answered();
  work.arrive();
  await waitFor(
    'the held claim answered and the worker waiting beside it',
    () => claims.answered() > before && work.waiters() > 0,
    {
      everyMs: 2,
    },
  );
}

describe('an idle worker picking up work', () => {
  it('answers work that arrives while its claim is out with a claim beside it, not after that claim comes back', async () => {
    const { db } = await open('pg');
    const claims = heldClaims(db);
    const work = arrivals();
    const started = gate();
    const job = defineJob('pickup', z.unknown(), async () => started.open());
    // The first claim finds the queue empty; the worker waits for work.
    const running = await idleWorker(db, job, claims, work);
    // Work is announced, and the claim that answers it is held out: it looked before the job was there.
    await announceWithClaimHeld(claims, work);
    const { job: enqueued } = await enqueue(db, { queue: 'pickup' });
    work.arrive();

    await started.opened;
    expect(claims.held()).toBe(1);
    claims.letGo();
    await running.stop(5000);
    const finished = await jobById(db, enqueued.id);
    expect(finished).toMatchObject({ status: 'succeeded', attempts: 1, workerId: 'idle-worker' });
    expect(await eventKinds(db, enqueued.id)).not.toContain('released');
  });

  it('gives back at once a job that two claims out brought beyond its free slots, and runs it after: each job once', async () => {
    const { db } = await open('pg');
    const claims = heldClaims(db);
    const work = arrivals();
    const { job, runs, firstRunning, finishFirst } = firstRunHeld();
    const running = await idleWorker(db, job, claims, work);
    // The held claim finds the first job; the one beside it, sent when the second arrives, finds that.
    const { job: first } = await enqueue(db, { queue: 'pickup' });
    await announceWithClaimHeld(claims, work);
    const { job: second } = await enqueue(db, { queue: 'pickup' });
    work.arrive();
    await firstRunning.opened;
    expect(runs).toEqual([second.id]);

    // The held claim's job comes back with no slot free: it goes back to the queue at once, not held.
    claims.letGo();
    await waitFor('the held claim let go', () => claims.held() === 0, { everyMs: 2 });
    await expect.poll(async () => (await jobById(db, first.id)).status).toBe('queued');
    finishFirst.open();
    await expect.poll(async () => (await jobById(db, first.id)).status).toBe('succeeded');
    await running.stop(5000);

    expect(runs).toEqual([second.id, first.id]);
    expect(await eventKinds(db, first.id)).toContain('released');
    expect(await jobById(db, first.id)).toMatchObject({ attempts: 1 });
    expect(await jobById(db, second.id)).toMatchObject({ status: 'succeeded', attempts: 1 });
  });

  it.each([
    {
      wake: 'a notification after its statement went out',
      arrive: (work: ReturnType<typeof arrivals>) => work.arrive(),
    },
    {
      wake: 'the poll interval running out (a job may have become ready since)',
      arrive: (work: ReturnType<typeof arrivals>) => work.poll(),
    },
  ])('counting notifications, still sends a claim beside one out on $wake', async ({ arrive }) => {
    const { db } = await open('pg');
    const claims = heldClaims(db);
    const work = arrivals();
    const started = gate();
    const job = defineJob('pickup', z.unknown(), async () => started.open());
    const running = await idleWorker(db, job, claims, work, { countingNotifications: true });
    await announceWithClaimHeld(claims, work);
    const { job: enqueued } = await enqueue(db, { queue: 'pickup' });
    arrive(work);

    await started.opened;
    expect(claims.held()).toBe(1);
    claims.letGo();
    await running.stop(5000);
    expect(await jobById(db, enqueued.id)).toMatchObject({ status: 'succeeded', attempts: 1 });
  });

  it('sends no claim beside the one that pauses before looking again: that one looks after the work, and finds the job', async () => {
    const { db } = await open('pg');
    const claims = heldClaims(db);
    const work = arrivals();
    const secondStarted = gate();
    const { job, runs, firstRunning, finishFirst } = firstRunHeld(() => secondStarted.open());
    // Two slots, so a claim that finds one job is not full and the idle worker listens beside the claim after it.
    const running = await idleWorker(db, job, claims, work, { concurrency: 2, countingNotifications: true });
    const { job: first } = await enqueue(db, { queue: 'pickup' });
    work.arrive();
    await firstRunning.opened;

    // The claim after the first job finds nothing (held until the second job is in), so it pauses before looking again.
    claims.holdNext();
    finishFirst.open();
    await waitFor('the claim after the first job held', () => claims.held() === 1, { everyMs: 2 });
    const { job: second } = await enqueue(db, { queue: 'pickup' });
    claims.letGo();
    await waitFor('the claim pausing and the worker listening beside it', () => work.waiters() === 2, {
      everyMs: 2,
    });
    const sentBefore = claims.sent();
    work.arrive();

    await secondStarted.opened;
    expect(claims.sent() - sentBefore).toBe(1);
    await running.stop(5000);
    expect(runs).toEqual([first.id, second.id]);
    expect(await jobById(db, second.id)).toMatchObject({ status: 'succeeded', attempts: 1 });
  });
});

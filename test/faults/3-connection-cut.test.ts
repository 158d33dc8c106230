import { afterAll, describe, expect, it } from 'vitest';
import { neonHttpDb } from '../../src/db/neon-http';
import { neonPoolDb } from '../../src/db/neon-ws';
import { pgDb } from '../../src/db/pg';
import type { Db } from '../../src/db/types';
import { demoJobs } from '../../src/drain/handlers/demo';
import { sleep } from '../../src/engine/sleep';
import { claimBatch, completeMany } from '../../src/engine';
import { createTestDatabase } from '../support/database';
import { startConfiguredNeonProxy } from '../support/drivers';
import { drain } from '../drain/support/drain';
import { runHistory, settledCount } from './support/history';
import { enqueueMany, jobs } from './support/load';
import { recordScenario, seconds } from './support/report';

const JOBS_PER_KIND = 600;
const CUTS = 24;
const CUT_EVERY_MS = 250;
const LEASE_SECONDS = 2;

describe('scenario 3: the connection between workers and Postgres cut mid-claim and mid-complete', () => {
  const cleanups: Array<() => Promise<void>> = [];
  afterAll(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup();
  });

  it('no job stays stuck beyond its lease, no acknowledged completion is lost', async () => {
    const database = await createTestDatabase();
    cleanups.push(database.drop);
    const proxy = await startConfiguredNeonProxy(database.url);
    cleanups.push(() => proxy.close());
    const setup = pgDb(database.url, { max: 2 });
    cleanups.push(() => setup.close());
    await enqueueMany(setup, [
      ...jobs(JOBS_PER_KIND, () => ({ queue: 'cut', type: 'sleep', payload: { ms: 30 }, leaseSeconds: LEASE_SECONDS })),
      ...jobs(JOBS_PER_KIND, (i) => ({ queue: 'cut', type: 'external', payload: i, leaseSeconds: LEASE_SECONDS })),
    ]);

    const errors = { drain: 0, claim: 0, complete: 0 };
    const acknowledged = new Set<string>();
    let done = false;

    // Drains over the Neon WebSocket Pool, as the Worker's cron drain runs.
    const drainLoop = async (index: number) => {
      while (!done) {
        const db: Db = neonPoolDb(database.url);
        try {
          await drain(db, demoJobs, { budgetSeconds: 8, workerId: `drain-${index}` });
        } catch {
          errors.drain += 1;
        } finally {
          await db.close().catch(() => {});
        }
        await sleep(100);
      }
    };
    // Pull workers over Neon HTTP: one request per statement, each can be cut.
    const pullLoop = async (index: number) => {
      const db = neonHttpDb(database.url);
      while (!done) {
        let claimed: Awaited<ReturnType<typeof claimBatch>>;
        try {
          claimed = await claimBatch(db, {
            max: 4,
            workerId: `pull-${index}`,
            types: ['external'],
            leaseSeconds: LEASE_SECONDS,
          });
        } catch {
          errors.claim += 1;
          continue;
        }
        if (claimed.length === 0) {
          await sleep(50);
          continue;
        }
        await sleep(30);
        try {
          const { completed } = await completeMany(db, claimed);
          for (const id of completed) acknowledged.add(id);
        } catch {
          errors.complete += 1;
        }
      }
    };
    const workers = [drainLoop(1), drainLoop(2), pullLoop(1), pullLoop(2)];

    for (let cut = 0; cut < CUTS; cut++) {
      await sleep(CUT_EVERY_MS);
      proxy.dropConnections();
    }
    const lastCutAt = Date.now();
    const deadline = lastCutAt + 60_000;
    let counts = await settledCount(setup);
    while (counts.succeeded < counts.total && Date.now() < deadline) {
      await sleep(200);
      counts = await settledCount(setup);
    }
    const settledAfterMs = Date.now() - lastCutAt;
    done = true;
    await Promise.all(workers);

    const history = await runHistory(setup);
    const notSucceeded = await setup.query<{ id: string }>({
      text: "SELECT id FROM skiplock.all_jobs WHERE id = ANY($1::uuid[]) AND state <> 'succeeded'",
      params: [[...acknowledged]],
    });
    const completedTwice = await setup.query<{ id: string }>({
      text: "SELECT id FROM skiplock.finished_jobs WHERE state = 'succeeded' GROUP BY id HAVING count(*) > 1",
      params: [],
    });
    const reaped = history.runs.filter((run) => run.endedBy === 'lease_expired').length;
    await recordScenario({
      scenario: 3,
      name: 'Connection cut between workers and Postgres',
      load: `${2 * JOBS_PER_KIND} jobs: half on 2 drain loops over the Neon WebSocket Pool, half on 2 pull loops over Neon HTTP, lease ${LEASE_SECONDS} s`,
      faults: `${CUTS} cuts of every proxied connection (local Neon proxy dropConnections), one each ${CUT_EVERY_MS} ms; calls cut: ${errors.claim} claims, ${errors.complete} completions, ${errors.drain} drains`,
      jobsLost: notSucceeded.length + (counts.total - counts.succeeded),
      runTwiceAtOnce: history.runTwiceAtOnce.length,
      limitViolations: 0,
      recovery: `queue empty ${seconds(settledAfterMs)} after the last cut (${reaped} runs cut off and handed back when their lease ended)`,
      notes: [
        `${counts.succeeded} of ${counts.total} succeeded; ${acknowledged.size} completions acknowledged to pull workers, ${notSucceeded.length} of them not succeeded`,
        `jobs with two completed events: ${completedTwice.length}`,
      ],
    });

    expect(counts.succeeded).toBe(counts.total);
    expect(notSucceeded).toEqual([]);
    expect(completedTwice).toEqual([]);
    expect(history.runTwiceAtOnce).toEqual([]);
  });
});

import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { pgDb } from '../../src/db/pg';
import { setTenant } from '../../src/engine';
import { sleep } from '../../src/engine/sleep';
import { engineDatabases } from '../support/engine-db';
import { peakConcurrency, untilAllSucceeded } from './support/history';
import { enqueueMany, jobs } from './support/load';
import { recordScenario, seconds } from './support/report';
import {
  LEDGER_SQL,
  medianAndMax,
  stepChild,
  stepParent,
  stepRunHistory,
  stepWorkers,
  untilWorkersListen,
  type StepWorker,
} from './support/step-jobs';

const open = engineDatabases();
const workers = stepWorkers(join(tmpdir(), `skiplock-faults-children-${process.pid}.log`));
afterEach(workers.killAll);

const PARENTS = 30;
const CHILDREN_PER_PARENT = 2;
const TENANT = 'solo';
const LIMIT = 1;
const CHILD_MS = 100;
const WORKERS = 3;
const CONCURRENCY = 4;
const LEASE_SECONDS = 2;
const KILLS = 4;

interface Kill {
  atMs: number;
  workerId: string;
  /** The running child whose parent this worker parked. */
  childId: string;
  /** The killed worker ran the child too: the child was orphaned with it. */
  heldTheChild: boolean;
}

describe('scenario 13: parents parked on children of a tenant limited to 1, their workers killed', () => {
  it('resumes each parent once per child end, loses none, and parked parents take no slot', async () => {
    const { db, url } = await open('pg', 4);
    await db.query({ text: LEDGER_SQL, params: [] });
    await setTenant(db, TENANT, { concurrency: LIMIT, rateLimit: null, weight: 1 });

    let generation = 0;
    const startWorker = () => workers.start(url, `children-${++generation}`, CONCURRENCY);
    const live: StepWorker[] = await Promise.all(Array.from({ length: WORKERS }, startWorker));
    await untilWorkersListen(db, WORKERS);

    // The tenant's running jobs and parked parents, every few milliseconds.
    const sampler = pgDb(url, { max: 1 });
    let samples = 0;
    let samplesAbove = 0;
    let sampledPeak = 0;
    let parkedPeak = 0;
    let done = false;
    const sampling = (async () => {
      while (!done) {
        const [row] = await sampler.query<{ running: number; parked: number }>({
          text: `SELECT count(*) FILTER (WHERE state = 'running')::integer AS running,
                        count(*) FILTER (WHERE state = 'parked' AND type = $2)::integer AS parked
                 FROM skiplock.jobs WHERE tenant = $1`,
          params: [TENANT, stepParent.type],
        });
        samples += 1;
        sampledPeak = Math.max(sampledPeak, row!.running);
        if (row!.running > LIMIT) samplesAbove += 1;
        if (row!.running > 0) parkedPeak = Math.max(parkedPeak, row!.parked);
        await sleep(3);
      }
    })();

    await enqueueMany(
      db,
      jobs(PARENTS, () => ({
        queue: stepParent.type,
        type: stepParent.type,
        tenant: TENANT,
        payload: { workMs: CHILD_MS },
        leaseSeconds: LEASE_SECONDS,
        maxAttempts: 20,
        backoffBaseSeconds: 0.1,
        backoffMaxSeconds: 0.5,
      })),
    );
    const started = Date.now();

    // While a child runs, the worker that parked its parent is killed (and replaced).
    const kills: Kill[] = [];
    while (kills.length < KILLS && Date.now() - started < 30_000) {
      await sleep(1000);
      const running = await db.query<{ childId: string; childWorker: string; parentWorker: string | null }>({
        text: `SELECT c.id AS "childId", c.worker_id AS "childWorker",
                      (SELECT e.worker_id FROM skiplock.job_events e WHERE e.job_id = l.job_id AND e.kind = 'parked'
                       ORDER BY e.at DESC LIMIT 1) AS "parentWorker"
               FROM skiplock.jobs c JOIN skiplock.job_links l ON l.other_id = c.id
               WHERE c.state = 'running' AND c.type = $1`,
        params: [stepChild.type],
      });
      for (const child of running) {
        const victim = live.find((worker) => worker.workerId === child.parentWorker);
        if (victim === undefined) continue;
        await victim.kill();
        kills.push({
          atMs: Date.now(),
          workerId: victim.workerId,
          childId: child.childId,
          heldTheChild: child.childWorker === victim.workerId,
        });
        live.splice(live.indexOf(victim), 1, await startWorker());
        break;
      }
    }

    const counts = await untilAllSucceeded(db, 60_000);
    const tookMs = Date.now() - started;
    done = true;
    await sampling;
    await sampler.close();

    const parents = await db.query<{
      id: string;
      state: string;
      result: unknown;
      resumed: number;
      children: number;
      ended: number;
    }>({
      text: `SELECT p.id, p.state, p.result,
                    (SELECT count(*)::integer FROM skiplock.job_events e WHERE e.job_id = p.id AND e.kind = 'resumed') AS resumed,
                    (SELECT count(*)::integer FROM skiplock.job_links l WHERE l.job_id = p.id AND l.kind = 'child') AS children,
                    (SELECT count(*)::integer FROM skiplock.job_links l
                     WHERE l.job_id = p.id AND l.kind = 'child' AND l.resolved_at IS NOT NULL) AS ended
             FROM skiplock.all_jobs p WHERE p.type = $1`,
      params: [stepParent.type],
    });
    const resumedTooOften = parents.filter((parent) => parent.resumed > parent.ended);
    const wrongChildren = parents.filter((parent) => parent.children !== CHILDREN_PER_PARENT);
    const lostParents = PARENTS - parents.filter((parent) => parent.state === 'succeeded').length;
    const wrongResults = parents.filter((parent) => JSON.stringify(parent.result) !== JSON.stringify([2, 4]));
    // How soon a parent ran again once its child ended: its next claim after the link resolved.
    const resumeDelays = await db.query<{ ms: number }>({
      text: `SELECT extract(epoch FROM (SELECT min(r.run_started_at) FROM step_ledger r
                                       WHERE r.job_id = l.job_id AND r.mark = 'run' AND r.run_started_at >= l.resolved_at)
                                      - l.resolved_at)::float8 * 1000 AS ms
             FROM skiplock.job_links l WHERE l.kind = 'child' AND l.resolved_at IS NOT NULL`,
      params: [],
    });
    const delay = medianAndMax(resumeDelays.map((row) => row.ms));
    const history = await stepRunHistory(db);
    const intervalPeak = peakConcurrency(history.runs).get(TENANT) ?? 0;
    const [events] = await db.query<{ parked: number; reaped: number }>({
      text: `SELECT count(*) FILTER (WHERE kind = 'parked')::integer AS parked,
                    count(*) FILTER (WHERE kind = 'lease_expired')::integer AS reaped
             FROM skiplock.job_events`,
      params: [],
    });

    await recordScenario({
      scenario: 13,
      name: 'Child jobs under a tenant limit',
      load: `${PARENTS} parents each invoking ${CHILDREN_PER_PARENT} children (${CHILD_MS} ms) one after the other, all of a tenant limited to ${LIMIT} running job, on ${WORKERS} Node workers × ${CONCURRENCY}, lease ${LEASE_SECONDS} s`,
      faults: `${kills.length} SIGKILLs of the worker that parked a parent, while its child ran (${kills.filter((kill) => kill.heldTheChild).length} of them ran that child too); ${samples} samples of the tenant's running count`,
      jobsLost: counts.total - counts.succeeded,
      runTwiceAtOnce: history.runTwiceAtOnce.length,
      limitViolations: samplesAbove + Math.max(0, intervalPeak - LIMIT) + resumedTooOften.length + wrongChildren.length,
      recovery: `a parent claimed again a median ${Math.round(delay.median)} ms (max ${seconds(delay.max)}) after its child ended (behind the tenant's other jobs, one at a time); all ${counts.total} jobs done in ${seconds(tookMs)}`,
      notes: [
        `limit violations here: samples above the tenant's limit (${samplesAbove}; peak sampled ${sampledPeak}, from the run intervals ${intervalPeak}), parents resumed more often than their children ended (${resumedTooOften.length}), parents with other than ${CHILDREN_PER_PARENT} children (${wrongChildren.length})`,
        `up to ${parkedPeak} parents parked while a job of the tenant ran: a parked parent holds no slot`,
        `${PARENTS - lostParents} of ${PARENTS} parents and ${counts.succeeded - (PARENTS - lostParents)} of ${counts.total - PARENTS} children succeeded; ${parents.reduce((sum, parent) => sum + parent.resumed, 0)} 'resumed' events for ${parents.reduce((sum, parent) => sum + parent.ended, 0)} children's ends; ${events!.parked} parks; ${events!.reaped} runs reaped after a kill; ${wrongResults.length} parents with a wrong result`,
      ],
    });

    expect(counts).toEqual({
      total: PARENTS * (1 + CHILDREN_PER_PARENT),
      succeeded: PARENTS * (1 + CHILDREN_PER_PARENT),
    });
    expect(samplesAbove).toBe(0);
    expect(intervalPeak).toBeLessThanOrEqual(LIMIT);
    expect(resumedTooOften).toEqual([]);
    expect(wrongChildren).toEqual([]);
    expect(wrongResults).toEqual([]);
    expect(history.runTwiceAtOnce).toEqual([]);
    expect(kills.length).toBeGreaterThan(0);
    expect(parkedPeak).toBeGreaterThan(LIMIT);
  });
});

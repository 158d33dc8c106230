import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { Db } from '../../src/db/types';
import { sleep } from '../../src/engine/sleep';
import { engineDatabases } from '../support/engine-db';
import { runHistory, settledCount, untilAllSucceeded } from './support/history';
import { enqueueMany, jobs } from './support/load';
import { processes, type Spawned } from './support/processes';
import { recordScenario, seconds } from './support/report';

const open = engineDatabases();
const spawn = processes(join(tmpdir(), `skiplock-faults-crash-${process.pid}.log`));

/** Scaled down from the 10,000 so the whole suite fits in a few minutes on 2 cores. */
const JOBS_PER_KIND = 2500;
const KILLS = 8;
const LEASE_SECONDS = 2;

interface Kill {
  atMs: number;
  workerId: string;
  /** Jobs the worker held when it was killed. */
  orphans: string[];
}

async function runningJobsOf(db: Db, workerId: string): Promise<string[]> {
  const rows = await db.query<{ id: string }>({
    text: "SELECT id FROM skiplock.jobs WHERE state = 'running' AND worker_id = $1",
    params: [workerId],
  });
  return rows.map((row) => row.id);
}

describe('scenario 1: workers killed with SIGKILL mid-job', () => {
  it('every job succeeds once, orphans run again only after their lease ends, nothing runs twice at once', async () => {
    const { db, url } = await open('pg', 4);
    await enqueueMany(db, [
      ...jobs(JOBS_PER_KIND, () => ({
        queue: 'crash',
        type: 'sleep',
        payload: { ms: 60 },
        leaseSeconds: LEASE_SECONDS,
      })),
      ...jobs(JOBS_PER_KIND, (i) => ({ queue: 'crash', type: 'external', payload: i, leaseSeconds: LEASE_SECONDS })),
    ]);

    let generation = 0;
    const startNode = () =>
      spawn.nodeWorker(url, `node-${++generation}`, { WORKER_CONCURRENCY: '8', POLL_INTERVAL_MS: '100' });
    const startPull = () =>
      spawn.pullWorker(url, `pull-${++generation}`, {
        PULL_TYPES: 'external',
        LEASE_SECONDS: String(LEASE_SECONDS),
        WORK_MS: '60',
      });
    const live: Spawned[] = await Promise.all([startNode(), startNode(), startPull(), startPull()]);
    const started = Date.now();

    const kills: Kill[] = [];
    // Kills stop early only if the queue runs dry first (then the figures say how many landed).
    for (
      let left = await settledCount(db);
      kills.length < KILLS && left.succeeded < left.total;
      left = await settledCount(db)
    ) {
      await sleep(1500);
      // Alternate Node and pull workers; only a worker that holds jobs right now is killed mid-job.
      const kind = kills.length % 2 === 0 ? 'node' : 'pull';
      const candidates = live.filter((child) => child.workerId.startsWith(kind));
      for (const victim of candidates) {
        const orphans = await runningJobsOf(db, victim.workerId);
        if (orphans.length === 0) continue;
        await victim.kill();
        kills.push({ atMs: Date.now(), workerId: victim.workerId, orphans });
        live.splice(live.indexOf(victim), 1, await (kind === 'node' ? startNode() : startPull()));
        break;
      }
    }
    const counts = await untilAllSucceeded(db, 90_000);
    const drainedInMs = Date.now() - started;

    const history = await runHistory(db);
    const orphanRecovery = kills.flatMap((kill) =>
      kill.orphans.map((id) => {
        const runs = history.runs.filter((run) => run.jobId === id);
        const killed = runs.find((run) => run.workerId === kill.workerId);
        const next = runs.find((run) => run.startMs > (killed?.startMs ?? kill.atMs));
        return {
          killedRunEndedBy: killed?.endedBy ?? null,
          reapedAfterMs: (killed?.endMs ?? Number.POSITIVE_INFINITY) - kill.atMs,
          rerunAfterMs: next === undefined ? null : next.startMs - kill.atMs,
        };
      }),
    );
    const reaped = orphanRecovery.filter((orphan) => orphan.killedRunEndedBy === 'lease_expired');
    const slowestReap = Math.max(0, ...reaped.map((orphan) => orphan.reapedAfterMs));
    const slowestRerun = Math.max(0, ...reaped.map((orphan) => orphan.rerunAfterMs ?? Number.POSITIVE_INFINITY));
    await recordScenario({
      scenario: 1,
      name: 'Crash: Node and pull workers SIGKILLed mid-job',
      load: `${2 * JOBS_PER_KIND} jobs (half sleep 60 ms on 2 Node workers × 8, half on 2 pull-worker processes), lease ${LEASE_SECONDS} s`,
      faults: `${kills.length} SIGKILLs of workers holding jobs (${kills.reduce((sum, kill) => sum + kill.orphans.length, 0)} jobs orphaned), each worker replaced`,
      jobsLost: counts.total - counts.succeeded,
      runTwiceAtOnce: history.runTwiceAtOnce.length,
      limitViolations: 0,
      recovery: `orphans handed back ≤ ${seconds(slowestReap)} after the kill (lease ${LEASE_SECONDS} s + reaper every 5 s), run again ≤ ${seconds(slowestRerun)} (behind the backlog)`,
      notes: [
        `${counts.succeeded} of ${counts.total} succeeded; drained in ${seconds(drainedInMs)}`,
        `${reaped.length} orphaned jobs handed back by the reaper after their lease ended; the others had finished before the kill landed`,
        `runs in the event log: ${history.runs.length}`,
      ],
    });

    expect(counts).toEqual({ total: 2 * JOBS_PER_KIND, succeeded: 2 * JOBS_PER_KIND });
    expect(history.runTwiceAtOnce).toEqual([]);
    expect(reaped.length).toBeGreaterThan(0);
    expect(reaped.every((orphan) => orphan.rerunAfterMs !== null && orphan.rerunAfterMs >= 0)).toBe(true);
  });
});

import { BURN_DOWN_CONCURRENCIES } from '../config';
import type { CpuReading } from '../cpu';
import { JobLedger } from '../ledger';
import { progress } from '../progress';
import { Results, type Figure } from '../results';
import { formatNumber } from '../stats';
import { SETUPS, type SystemDriver } from '../systems/types';
import {
  preloadedBacklog,
  repetitions,
  reportRep,
  stopAndGate,
  withSystem,
  type Backlog,
  type Workload,
  type WorkloadContext,
} from './harness';
import { preload } from './produce';

/** How long workers may take to start their first job before the run counts as stuck. */
const FIRST_JOB_WAIT_MS = 30_000;

/**
 * (b) Burn-down: a backlog of pre-inserted no-op jobs drained by 1, 8 and 32
 * concurrent workers. Throughput runs from the first job's start to the
 * last one's, so start-up and shutdown are left out for every system alike.
 * A run goes to the end of the backlog, or stops at a time cap long enough
 * to be steady; a system that has not finished by then is measured over
 * what it did (and flagged). More repetitions than the other workloads:
 * this is the figure the machine's load moves most.
 */
export const burnDownWorkload: Workload = async (context) => {
  const { scale } = context.options;
  const results = new Results();
  for (const setup of SETUPS) {
    for (const concurrency of BURN_DOWN_CONCURRENCIES) {
      const variant = `${concurrency} worker${concurrency === 1 ? '' : 's'}`;
      progress(`(b) burn-down · ${setup} · ${variant}: ${scale.burnDownJobs.toLocaleString('en-US')} jobs`);
      const reps = repetitions(context, scale.burnDownReps);
      for (const rep of reps) {
        for (const driver of context.drivers) {
          const backlog = await burnDownBacklog(context, driver);
          await withSystem(
            context,
            driver,
            setup,
            'burn_down',
            async (system) => {
              const ledger = JobLedger.fromBacklog(backlog.jobs);
              const workers = await system.startWorkers({ concurrency, handler: ledger.handler });
              await ledger.whenStarted(1, FIRST_JOB_WAIT_MS);
              const [cpuBefore, startedBefore] = [await context.cpu?.read(), ledger.started];
              const finished = await ledger.whenStarted(scale.burnDownJobs, scale.burnDownCapSeconds * 1000);
              const cpuAfter = await context.cpu?.read();
              const ran = ledger.started;
              const cpuFigures = cpuPerJob(cpuBefore, cpuAfter, ran - startedBefore);
              const stopAt = performance.now();
              const gate = await stopAndGate(workers, system, ledger);
              const perSecond = ledger.startRate();
              const flag = finished ? undefined : `capped at ${scale.burnDownCapSeconds} s`;
              results.recordAll(
                { system: driver.name, setup, variant },
                gate,
                [
                  { metric: 'jobs/s', better: 'higher', value: perSecond, ...(flag === undefined ? {} : { flag }) },
                  ...cpuFigures,
                ],
                { ran, finished, stopMs: performance.now() - stopAt },
              );
              reportRep(
                `${driver.name} ${setup} ${variant}`,
                rep,
                context,
                gate,
                `${formatNumber(perSecond)} jobs/s${finished ? '' : ` (${ran} ran before the cap)`}`,
                reps.length,
              );
            },
            backlog,
          );
        }
      }
    }
  }
  return {
    id: 'burn-down',
    title: '(b) Burn-down throughput',
    method: [
      `${scale.burnDownJobs.toLocaleString('en-US')} jobs are loaded once per system through its batch API (1,000 per call) and analyzed, as ` +
        'autovacuum would on a live system; every repetition starts from a fresh copy of that database (CREATE DATABASE ... ' +
        'TEMPLATE). One worker process starts with ' +
        'the given concurrency (jobs running at once) and `concurrency + 2` database connections. ' +
        'Jobs per second run from the first handler start to the last.',
      `A run goes to the end of the backlog or stops after ${scale.burnDownCapSeconds} s of work; where that cap was hit the figure covers ` +
        'the jobs that ran and is flagged. The gate then stops the workers gracefully and checks every job ran once or still waits ' +
        '(for skiplock: every job that ran is read back from its finished jobs as succeeded). ' +
        `${Math.max(context.options.reps, scale.burnDownReps)} repetitions; each cell shows the median and the spread (min–max).`,
      'CPU µs per job: the CPU time the Postgres server and the benchmark process (the worker runs in it) spent from the first job ' +
        "to the last, over the jobs in between, read from /proc: far less moved by the machine's load than jobs/s.",
    ],
    parameters: {
      jobs: scale.burnDownJobs,
      capSeconds: scale.burnDownCapSeconds,
      repetitions: Math.max(context.options.reps, scale.burnDownReps),
      concurrencies: [...BURN_DOWN_CONCURRENCIES],
    },
    measurements: results.measurements,
  };
};

/**
 * CPU microseconds per job that started between two readings: the server's
 * and this process's (the worker runs in it, beside the harness's ledger).
 */
function cpuPerJob(before: CpuReading | undefined, after: CpuReading | undefined, jobs: number): Figure[] {
  if (before === undefined || after === undefined || jobs <= 0) return [];
  return [
    {
      metric: 'database CPU µs per job',
      better: 'lower',
      value: ((after.postgresMs - before.postgresMs) * 1000) / jobs,
    },
    { metric: 'worker CPU µs per job', better: 'lower', value: ((after.processMs - before.processMs) * 1000) / jobs },
  ];
}

/** The burn-down backlog of a system, also the held-snapshot workload's. */
export function burnDownBacklog(context: WorkloadContext, driver: SystemDriver): Promise<Backlog> {
  return preloadedBacklog(context, driver, 'burn_down', (system, ledger) =>
    preload(system, ledger, context.options.scale.burnDownJobs),
  );
}

import { BURN_DOWN_CONCURRENCIES } from '../config';
import { JobLedger } from '../ledger';
import { progress } from '../progress';
import { Results } from '../results';
import { formatNumber } from '../stats';
import { SETUPS, type SystemDriver } from '../systems/types';
import { preloadedBacklog, repetitions, reportRep, stopAndGate, withSystem, type Backlog, type Workload, type WorkloadContext } from './harness';
import { preload } from './produce';

/** How long workers may take to start their first job before the run counts as stuck. */
const FIRST_JOB_WAIT_MS = 30_000;

/**
 * (b) Burn-down: a backlog of pre-inserted no-op jobs drained by 1, 8 and 32
 * concurrent workers. Throughput runs from the first job's start to the
 * last one's, so start-up and shutdown are left out for every system alike.
 * A run stops at a time cap; a system that has not finished by then is
 * measured over what it did (and flagged).
 */
export const burnDownWorkload: Workload = async (context) => {
  const { scale } = context.options;
  const results = new Results();
  for (const setup of SETUPS) {
    for (const concurrency of BURN_DOWN_CONCURRENCIES) {
      const variant = `${concurrency} worker${concurrency === 1 ? '' : 's'}`;
      progress(`(b) burn-down · ${setup} · ${variant}: ${scale.burnDownJobs.toLocaleString('en-US')} jobs`);
      for (const rep of repetitions(context)) {
        for (const driver of context.drivers) {
          const backlog = await burnDownBacklog(context, driver);
          await withSystem(context, driver, setup, 'burn_down', async (system) => {
            const ledger = JobLedger.fromBacklog(backlog.jobs);
            const workers = await system.startWorkers({ concurrency, handler: ledger.handler });
            await ledger.whenStarted(1, FIRST_JOB_WAIT_MS);
            const finished = await ledger.whenStarted(scale.burnDownJobs, scale.burnDownCapSeconds * 1000);
            const ran = ledger.started;
            const stopAt = performance.now();
            const gate = await stopAndGate(workers, system, ledger);
            const perSecond = ledger.startRate();
            const flag = finished ? undefined : `capped at ${scale.burnDownCapSeconds} s`;
            results.recordAll(
              { system: driver.name, setup, variant },
              gate,
              [{ metric: 'jobs/s', better: 'higher', value: perSecond, ...(flag === undefined ? {} : { flag }) }],
              { ran, finished, stopMs: performance.now() - stopAt },
            );
            reportRep(`${driver.name} ${setup} ${variant}`, rep, context, gate, `${formatNumber(perSecond)} jobs/s${finished ? '' : ` (${ran} ran before the cap)`}`);
          }, backlog);
        }
      }
    }
  }
  return {
    id: 'burn-down',
    title: '(b) Burn-down throughput',
    method: [
      `${scale.burnDownJobs.toLocaleString('en-US')} jobs are loaded once per system through its batch API (1,000 per call); every ` +
        'repetition starts from a fresh copy of that database (CREATE DATABASE ... TEMPLATE). One worker process starts with ' +
        'the given concurrency (jobs running at once) and `concurrency + 2` database connections. ' +
        'Jobs per second run from the first handler start to the last.',
      `A run stops after ${scale.burnDownCapSeconds} s of work; where that cap was hit the figure covers the jobs that ran and is flagged. ` +
        'The gate then stops the workers gracefully and checks every job ran once or still waits.',
    ],
    parameters: { jobs: scale.burnDownJobs, capSeconds: scale.burnDownCapSeconds, concurrencies: [...BURN_DOWN_CONCURRENCIES] },
    measurements: results.measurements,
  };
};

/** The burn-down backlog of a system, also the held-snapshot workload's. */
export function burnDownBacklog(context: WorkloadContext, driver: SystemDriver): Promise<Backlog> {
  return preloadedBacklog(context, driver, 'burn_down', (system, ledger) => preload(system, ledger, context.options.scale.burnDownJobs));
}

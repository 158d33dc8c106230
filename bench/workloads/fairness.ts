import { STANDARD_CONCURRENCY } from '../config';
import { JobLedger } from '../ledger';
import { progress } from '../progress';
import { Results } from '../results';
import { SETUPS, type BenchPayload } from '../systems/types';
import { preloadedBacklog, repetitions, reportRep, stopAndGate, withSystem, type Workload } from './harness';
import { preload } from './produce';

const SMALL_JOBS = 10;

/**
 * (f) Fairness: tenant "big" has a backlog, then tenant "small" enqueues 10
 * jobs; one worker process (standard concurrency) starts. When does the
 * small tenant's first job start, counted in job starts?
 *
 * skiplock files each job under its tenant and claims round robin across
 * tenants. pg-boss and graphile-worker have no tenants; their users put
 * everything in one queue, which is FIFO, so the small tenant's first job is
 * due after the whole backlog. Where a system has not started it within the
 * jobs we watch, the figure is that FIFO position (backlog + 1), flagged.
 */
export const fairnessWorkload: Workload = async (context) => {
  const { scale } = context.options;
  const watched = scale.fairnessClaimsWatched;
  const results = new Results();
  for (const setup of SETUPS) {
    progress(
      `(f) fairness · ${setup}: ${SMALL_JOBS} small-tenant jobs behind ${scale.fairnessBacklog.toLocaleString('en-US')}`,
    );
    for (const rep of repetitions(context)) {
      for (const driver of context.drivers) {
        const backlog = await preloadedBacklog(context, driver, 'fairness', async (system, ledger) => {
          await preload(system, ledger, scale.fairnessBacklog, 'big');
          for (const job of ledger.allocate(SMALL_JOBS, 'small')) {
            await system.enqueue(job);
            ledger.recordEnqueued(1);
          }
        });
        await withSystem(
          context,
          driver,
          setup,
          'fairness',
          async (system) => {
            const ledger = JobLedger.fromBacklog(backlog.jobs);
            const tenants: string[] = [];
            const handler = async (payload: BenchPayload) => {
              tenants.push(payload.tenant);
              await ledger.handler(payload);
            };
            const workers = await system.startWorkers({ concurrency: STANDARD_CONCURRENCY, handler });
            await waitFor(
              () => tenants.filter((t) => t === 'small').length >= SMALL_JOBS || tenants.length >= watched,
              scale.fairnessWatchSeconds * 1000,
            );
            const gate = await stopAndGate(workers, system, ledger);
            const first = tenants.indexOf('small') + 1;
            const last = tenants.lastIndexOf('small') + 1;
            const seen = first > 0;
            const value = seen ? first : scale.fairnessBacklog + 1;
            const flag = seen ? undefined : `not among the first ${tenants.length} starts: FIFO position`;
            results.recordAll(
              {
                system: driver.name,
                setup,
                variant: `${SMALL_JOBS} jobs behind ${scale.fairnessBacklog.toLocaleString('en-US')}`,
              },
              gate,
              [
                {
                  metric: 'first small-tenant start (position)',
                  better: 'lower',
                  value,
                  ...(flag === undefined ? {} : { flag }),
                },
              ],
              {
                observedStarts: tenants.length,
                firstSmall: seen ? first : null,
                lastSmall: seen ? last : null,
                smallStarted: tenants.filter((t) => t === 'small').length,
              },
            );
            reportRep(
              `${driver.name} ${setup}`,
              rep,
              context,
              gate,
              seen
                ? `first small job at start #${first}, last at #${last}`
                : `no small job among ${tenants.length} starts`,
            );
          },
          backlog,
        );
      }
    }
  }
  return {
    id: 'fairness',
    title: '(f) Fairness: a small tenant behind a big one',
    method: [
      `Tenant "big" enqueues ${scale.fairnessBacklog.toLocaleString('en-US')} jobs (batch API), then tenant "small" enqueues ${SMALL_JOBS}, ` +
        `one per call. One worker process (concurrency ${STANDARD_CONCURRENCY}) starts; the harness records the tenant of every job start ` +
        `until all small-tenant jobs have started, ${watched.toLocaleString('en-US')} jobs have started, or ${scale.fairnessWatchSeconds} s have passed. ` +
        'The backlog is loaded once per system; each repetition starts from a copy of that database.',
      'skiplock: jobs carry their tenant. pg-boss and graphile-worker have no tenants, so both tenants share one queue, as their users ' +
        'would; where the small tenant did not start within the watched jobs, the figure is its FIFO position.',
    ],
    parameters: {
      backlog: scale.fairnessBacklog,
      smallJobs: SMALL_JOBS,
      watchedStarts: watched,
      watchSeconds: scale.fairnessWatchSeconds,
    },
    measurements: results.measurements,
  };
};

async function waitFor(done: () => boolean, timeoutMs: number): Promise<void> {
  const endBy = performance.now() + timeoutMs;
  while (!done() && performance.now() < endBy) await new Promise((resolve) => setTimeout(resolve, 20));
}

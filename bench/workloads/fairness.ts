import { BULK_SIZE, KEY_COUNT, STANDARD_CONCURRENCY } from '../config';
import { JobLedger, type GateResult } from '../ledger';
import { progress } from '../progress';
import { Results, type Figure } from '../results';
import { SETUPS, type BenchPayload, type SetupName, type SystemDriver } from '../systems/types';
import {
  preloadedBacklog,
  repetitions,
  reportRep,
  stopAndGate,
  withSystem,
  type Workload,
  type WorkloadContext,
} from './harness';
import { keyOf } from './keys';
import { enqueueAll } from './produce';

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
 *
 * skiplock runs it a second time with the big tenant's jobs on keys of one
 * slot (issue 40: fairness unchanged with keys in use): most of its backlog
 * is then held, outside what a claim reads, and the round robin must still
 * reach the small tenant as soon.
 */
export const fairnessWorkload: Workload = async (context) => {
  const { scale } = context.options;
  const results = new Results();
  for (const setup of SETUPS) {
    progress(
      `(f) fairness · ${setup}: ${SMALL_JOBS} small-tenant jobs behind ${scale.fairnessBacklog.toLocaleString('en-US')}, ` +
        `without keys and (skiplock) on ${KEY_COUNT.toLocaleString('en-US')} keys`,
    );
    for (const rep of repetitions(context)) {
      for (const driver of context.drivers) {
        const keyings = driver.name.startsWith('skiplock') ? [false, true] : [false];
        for (const keyed of keyings) {
          const run = await fairnessRun(context, driver, setup, keyed);
          results.recordAll(
            { system: driver.name, setup, variant: fairnessVariant(scale.fairnessBacklog, keyed) },
            run.gate,
            [run.figure],
            run.details,
          );
          const { firstSmall, lastSmall, observedStarts } = run.details;
          reportRep(
            `${driver.name} ${setup}${keyed ? ' keyed' : ''}`,
            rep,
            context,
            run.gate,
            firstSmall === null
              ? `no small job among ${observedStarts} starts`
              : `first small job at start #${firstSmall}, last at #${lastSmall}`,
          );
        }
      }
    }
  }
  return {
    id: 'fairness',
    title: '(f) Fairness: a small tenant behind a big one',
    method: [
      `Tenant "big" enqueues ${scale.fairnessBacklog.toLocaleString('en-US')} jobs (batch API), then tenant "small" enqueues ${SMALL_JOBS}, ` +
        `one per call. One worker process (concurrency ${STANDARD_CONCURRENCY}) starts; the harness records the tenant of every job start ` +
        `until all small-tenant jobs have started, ${scale.fairnessClaimsWatched.toLocaleString('en-US')} jobs have started, or ${scale.fairnessWatchSeconds} s have passed. ` +
        'The backlog is loaded once per system; each repetition starts from a copy of that database.',
      'skiplock: jobs carry their tenant. pg-boss and graphile-worker have no tenants, so both tenants share one queue, as their users ' +
        'would; where the small tenant did not start within the watched jobs, the figure is its FIFO position.',
      `With keys (skiplock only): the same, with each of the big tenant's jobs on one of ${KEY_COUNT.toLocaleString('en-US')} ` +
        "concurrency keys of one slot (the keys of (k)), so most of its backlog is held; the small tenant's jobs have none. " +
        'The peers are not run: with no tenants, their figure is the FIFO position with keys or without.',
    ],
    parameters: {
      backlog: scale.fairnessBacklog,
      smallJobs: SMALL_JOBS,
      keys: KEY_COUNT,
      watchedStarts: scale.fairnessClaimsWatched,
      watchSeconds: scale.fairnessWatchSeconds,
    },
    measurements: results.measurements,
  };
};

/** A row of the table: the backlog, and whether the big tenant's jobs carry keys. */
export function fairnessVariant(backlog: number, keyed: boolean): string {
  return `${SMALL_JOBS} jobs behind ${backlog.toLocaleString('en-US')}${keyed ? FAIRNESS_KEYED_SUFFIX : ''}`;
}
/** What the keyed row's name ends with (bench/targets.ts tells the rows apart by it). */
export const FAIRNESS_KEYED_SUFFIX = ` on ${KEY_COUNT.toLocaleString('en-US')} keys`;

interface FairnessRun {
  gate: GateResult;
  figure: Figure;
  details: { observedStarts: number; firstSmall: number | null; lastSmall: number | null; smallStarted: number };
}

/** One repetition: the worker starts on a copy of the backlog; at which start did the small tenant's first job come? */
async function fairnessRun(
  context: WorkloadContext,
  driver: SystemDriver,
  setup: SetupName,
  keyed: boolean,
): Promise<FairnessRun> {
  const { scale } = context.options;
  const label = keyed ? 'fairness_keys' : 'fairness';
  const backlog = await preloadedBacklog(context, driver, label, async (system, ledger) => {
    const big = ledger.allocate(scale.fairnessBacklog, 'big');
    const jobs = keyed ? big.map((job) => ({ ...job, key: { kind: 'serial' as const, name: keyOf(job.n) } })) : big;
    await enqueueAll(system, ledger, jobs, { callers: 4, perCall: BULK_SIZE });
    for (const job of ledger.allocate(SMALL_JOBS, 'small')) {
      await system.enqueue(job);
      ledger.recordEnqueued(1);
    }
  });
  return withSystem(
    context,
    driver,
    setup,
    label,
    async (system) => {
      const ledger = JobLedger.fromBacklog(backlog.jobs);
      const tenants: string[] = [];
      const handler = async (payload: BenchPayload) => {
        tenants.push(payload.tenant);
        await ledger.handler(payload);
      };
      const workers = await system.startWorkers({ concurrency: STANDARD_CONCURRENCY, handler, serialKeys: keyed });
      await waitFor(
        () =>
          tenants.filter((t) => t === 'small').length >= SMALL_JOBS || tenants.length >= scale.fairnessClaimsWatched,
        scale.fairnessWatchSeconds * 1000,
      );
      const gate = await stopAndGate(workers, system, ledger);
      const first = tenants.indexOf('small') + 1;
      const last = tenants.lastIndexOf('small') + 1;
      const seen = first > 0;
      const flag = seen ? undefined : `not among the first ${tenants.length} starts: FIFO position`;
      return {
        gate,
        figure: {
          metric: 'first small-tenant start (position)',
          better: 'lower',
          value: seen ? first : scale.fairnessBacklog + 1,
          ...(flag === undefined ? {} : { flag }),
        },
        details: {
          observedStarts: tenants.length,
          firstSmall: seen ? first : null,
          lastSmall: seen ? last : null,
          smallStarted: tenants.filter((t) => t === 'small').length,
        },
      };
    },
    backlog,
  );
}

async function waitFor(done: () => boolean, timeoutMs: number): Promise<void> {
  const endBy = performance.now() + timeoutMs;
  while (!done() && performance.now() < endBy) await new Promise((resolve) => setTimeout(resolve, 20));
}

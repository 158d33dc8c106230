import type { Json } from '../../src/engine/types';
import { PRODUCERS, STANDARD_CONCURRENCY } from '../config';
import { JobLedger } from '../ledger';
import { progress } from '../progress';
import { type Figure, latencyFigures, Results } from '../results';
import { formatNumber, mean } from '../stats';
import { SETUPS, type SetupName, type SystemDriver } from '../systems/types';
import {
  describeFigures,
  reportRep,
  sleep,
  stopAndGate,
  withSystem,
  type Workload,
  type WorkloadContext,
} from './harness';
import { produce } from './produce';

const LOADS = [0.5, 0.8] as const;
const DEPTH_SAMPLE_MS = 250;
/** After producing stops, the workers get this long to empty the queue before they are stopped. */
const DRAIN_MS = 30_000;
/** The capacity run warms up for half its measuring time, at most this long. */
const CAPACITY_WARM_UP_MAX_MS = 2000;

/**
 * (d) Steady state: producers at 50% and 80% of the system's capacity, for
 * the whole steady-state duration, one worker process at the standard
 * concurrency. Capacity is measured first, once per system and setup: jobs
 * started per second while the producers enqueue single jobs as fast as
 * they go against the same workers (whichever side is the bottleneck). The first tenth (at most 10 s) warms up; the rest is
 * cut into equal windows, one per repetition, so the repetitions show
 * whether the system holds its pace as its tables grow. Per window: pickup
 * latency of the jobs enqueued in it, and the mean number of jobs enqueued
 * but not yet started.
 */
export const steadyStateWorkload: Workload = async (context) => {
  const { scale, reps } = context.options;
  const results = new Results();
  const warmUpMs = Math.min(10_000, scale.steadySeconds * 100);
  const windowMs = (scale.steadySeconds * 1000 - warmUpMs) / reps;
  const capacities: Record<string, number> = {};
  for (const setup of SETUPS) {
    for (const driver of context.drivers) {
      const capacity = await measureCapacity(context, driver, setup);
      capacities[`${driver.name} ${setup}`] = capacity;
      for (const load of LOADS) {
        const variant = `${load * 100}% of capacity`;
        const perSecond = capacity * load;
        progress(
          `(d) steady state · ${driver.name} ${setup} · ${variant}: ${formatNumber(perSecond)} jobs/s for ${scale.steadySeconds} s`,
        );
        await withSystem(context, driver, setup, 'steady', async (system) => {
          const ledger = new JobLedger();
          const workers = await system.startWorkers({ concurrency: STANDARD_CONCURRENCY, handler: ledger.handler });
          const startedAt = performance.now();
          const production = produce(system, ledger, { callers: PRODUCERS, perSecond });
          const depth: Array<{ at: number; jobs: number }> = [];
          const sampler = setInterval(
            () => depth.push({ at: performance.now(), jobs: ledger.enqueued - ledger.started }),
            DEPTH_SAMPLE_MS,
          );
          await sleep(scale.steadySeconds * 1000);
          clearInterval(sampler);
          const { sent, behind } = await production.stop();
          await ledger.whenStarted(ledger.enqueued, DRAIN_MS);
          const gate = await stopAndGate(workers, system, ledger);
          const pickups = ledger.pickups();
          for (let window = 0; window < reps; window++) {
            const from = startedAt + warmUpMs + window * windowMs;
            const to = from + windowMs;
            const latencies = pickups.filter((p) => p.calledAt >= from && p.calledAt < to).map((p) => p.ms);
            const depths = depth.filter((d) => d.at >= from && d.at < to).map((d) => d.jobs);
            const details: Json = {
              jobs: latencies.length,
              jobsPerSecond: (latencies.length * 1000) / windowMs,
              maxDepth: Math.max(...depths),
            };
            const figures: Figure[] = [
              ...latencyFigures(latencies),
              { metric: 'mean depth', better: 'lower', value: mean(depths) },
            ];
            results.recordAll({ system: driver.name, setup, variant }, gate, figures, details);
            reportRep(`${driver.name} ${setup} ${variant} window`, window + 1, context, gate, describeFigures(figures));
          }
          if (behind > 0) progress(`  producers fell ${behind} jobs behind the rate (${sent} sent)`);
        });
      }
    }
  }
  return {
    id: 'steady',
    title: '(d) Steady state at 50% and 80% of capacity',
    method: [
      `Capacity: for ${scale.steadyCapacitySeconds} s after a ${capacityWarmUpMs(scale.steadyCapacitySeconds) / 1000} s warm-up, ${PRODUCERS} producers enqueue single jobs as fast as they go ` +
        `against one worker process at concurrency ${STANDARD_CONCURRENCY}; capacity is the jobs started per second (measured once per system and setup). ` +
        `Here ${PRODUCERS} producers enqueue single jobs at a fixed rate (an open loop: jobs fall due on the clock) for ${scale.steadySeconds} s.`,
      `The first ${warmUpMs / 1000} s warm up; the rest is cut into ${reps} windows of ${formatNumber(windowMs / 1000)} s, and each window is one repetition. ` +
        'Latency runs from the enqueue call to the handler start; depth is the number of jobs enqueued (committed) but not yet started, ' +
        `sampled every ${DEPTH_SAMPLE_MS} ms.`,
    ],
    parameters: {
      seconds: scale.steadySeconds,
      warmUpMs,
      windowMs,
      loads: [...LOADS],
      concurrency: STANDARD_CONCURRENCY,
      capacities,
    },
    measurements: results.measurements,
  };
};

/** Jobs started per second with producers flat out against the standard workers. */
async function measureCapacity(context: WorkloadContext, driver: SystemDriver, setup: SetupName): Promise<number> {
  const seconds = context.options.scale.steadyCapacitySeconds;
  return withSystem(context, driver, setup, 'capacity', async (system) => {
    const ledger = new JobLedger();
    const workers = await system.startWorkers({ concurrency: STANDARD_CONCURRENCY, handler: ledger.handler });
    const production = produce(system, ledger, { callers: PRODUCERS });
    await sleep(capacityWarmUpMs(seconds));
    const before = ledger.started;
    await sleep(seconds * 1000);
    const capacity = (ledger.started - before) / seconds;
    await production.stop();
    const gate = await stopAndGate(workers, system, ledger);
    progress(
      `(d) capacity · ${driver.name} ${setup}: ${formatNumber(capacity)} jobs/s${gate.passed ? '' : ` (gate failed: ${gate.problems.join('; ')})`}`,
    );
    return capacity;
  });
}

function capacityWarmUpMs(capacitySeconds: number): number {
  return Math.min(CAPACITY_WARM_UP_MAX_MS, (capacitySeconds * 1000) / 2);
}

import type { Json } from '../../src/engine/types';
import { statementCounter, statementTime, vacuumAnalyze } from '../db-metrics';
import { JobLedger } from '../ledger';
import { progress } from '../progress';
import { type Figure, Results } from '../results';
import { percentile } from '../stats';
import type { QueueSystem } from '../systems/types';
import { describeFigures, repetitions, reportRep, stopWorkers, withSystem, type Workload } from './harness';

/** Claim and complete cycles per repetition (fewer if the time runs out). */
const CYCLES = 200;
const SHALLOW = 1000;

interface Level {
  label: string;
  waiting: number;
  finished: number;
}

/**
 * (e) Claim latency against depth: the same series of claims with 1,000 jobs
 * waiting, and again with the deep backlog waiting and as many finished jobs
 * kept (graphile-worker deletes finished jobs, so it keeps none).
 *
 * A cycle is one claim, the no-op handler and the completion, one after the
 * other. Where the library has a public claim call (skiplock `claimBatch`,
 * pg-boss `fetch`) the harness calls it directly, claiming 1 and then 10 jobs
 * per cycle (the old bench/claim-depth.ts measured 10), and tops the queue
 * back up after each cycle, untimed, so the depth stays put. graphile-worker
 * has none, so its own worker runs at concurrency 1 without a local queue
 * (one claim per job) and a cycle is the time between two job starts. The
 * server's mean time for the claim statement comes from pg_stat_statements.
 * The backlog is bulk-inserted in SQL and vacuumed, then every system runs
 * its defaults setup: claiming reads none of the tuned settings.
 */
export const depthWorkload: Workload = async (context) => {
  const { scale } = context.options;
  const results = new Results();
  const levels: Level[] = [
    { label: `${SHALLOW.toLocaleString('en-US')} waiting`, waiting: SHALLOW, finished: 0 },
    {
      label: `${scale.depthWaiting.toLocaleString('en-US')} waiting + ${scale.depthFinished.toLocaleString('en-US')} finished`,
      waiting: scale.depthWaiting,
      finished: scale.depthFinished,
    },
  ];
  for (const driver of context.drivers) {
    await withSystem(context, driver, 'defaults', 'depth', async (system, db) => {
      const ledger = new JobLedger();
      /** Adds waiting (and finished) jobs; a negative count adds none. */
      const topUp = async (wanted: number, finished = 0) => {
        const waiting = Math.max(0, wanted);
        if (waiting === 0 && finished === 0) return;
        await system.fill({ firstN: ledger.reserve(waiting), waiting, finished });
        ledger.recordEnqueued(waiting);
        ledger.recordFinishedBeforehand(finished);
      };
      for (const level of levels) {
        progress(`(e) depth · ${driver.name} · loading ${level.label}`);
        const inventory = await system.inventory();
        await topUp(level.waiting - inventory.waiting, level.finished);
        await vacuumAnalyze(db);
        const batches = system.claimDirect === undefined ? [undefined] : [1, 10];
        for (const batch of batches) {
          const variant = `${level.label}, ${batch === undefined ? 'worker, 1 job per claim' : `claim ${batch}`}`;
          for (const rep of repetitions(context)) {
            const counter = statementCounter(db);
            await counter.reset();
            const cycles =
              batch === undefined
                ? await workerCycles(system, ledger, scale.depthSeconds)
                : await directCycles(system, ledger, batch, scale.depthSeconds, topUp);
            const claim = await statementTime(db, system.claimStatementMarker);
            if (batch === undefined) await topUp(level.waiting - (await system.inventory()).waiting);
            const gate = ledger.gate(await system.inventory());
            const figures: Figure[] = [
              { metric: 'cycle p50 ms', better: 'lower', value: percentile(cycles, 0.5) },
              { metric: 'cycle p99 ms', better: 'lower', value: percentile(cycles, 0.99) },
              ...(claim === undefined
                ? []
                : [{ metric: 'claim statement mean ms', better: 'lower' as const, value: claim.meanMs }]),
            ];
            const details: Json = {
              cycles: cycles.length,
              ...(claim === undefined ? {} : { claimCalls: claim.calls, claimMaxMs: claim.maxMs }),
            };
            results.recordAll({ system: driver.name, setup: 'defaults', variant }, gate, figures, details);
            reportRep(`${driver.name} ${variant}`, rep, context, gate, describeFigures(figures));
          }
        }
      }
    });
  }
  return {
    id: 'depth',
    title: '(e) Claim latency against queue depth',
    method: [
      `Each system gets one database. First ${SHALLOW.toLocaleString('en-US')} jobs wait; then the backlog grows to ` +
        `${scale.depthWaiting.toLocaleString('en-US')} waiting plus ${scale.depthFinished.toLocaleString('en-US')} finished jobs ` +
        "(bulk INSERT ... SELECT into the system's own table, then VACUUM ANALYZE). At each depth a repetition runs up to " +
        `${CYCLES} claim-run-complete cycles in series, at most ${scale.depthSeconds} s.`,
      'skiplock and pg-boss are driven through their public claim calls (`claimBatch` + `completeMany`, `fetch` + `complete`) with 1 and ' +
        'with 10 jobs per claim, topping the queue up after every cycle (untimed) so the depth stays put. graphile-worker has no public ' +
        'claim call: its worker runs at concurrency 1 with no local queue, one claim per job, and a cycle is the time between two job starts ' +
        '(it keeps no finished jobs, so its deep level has only the waiting ones).',
      "The claim statement's mean server time comes from pg_stat_statements, found by a piece of its text.",
    ],
    parameters: {
      cycles: CYCLES,
      seconds: scale.depthSeconds,
      shallow: SHALLOW,
      deepWaiting: scale.depthWaiting,
      deepFinished: scale.depthFinished,
    },
    measurements: results.measurements,
  };
};

/** Claim, run and complete `batch` jobs per cycle through the library's claim call; ms per cycle. */
async function directCycles(
  system: QueueSystem,
  ledger: JobLedger,
  batch: number,
  seconds: number,
  topUp: (waiting: number) => Promise<void>,
): Promise<number[]> {
  const claimDirect = system.claimDirect!;
  const times: number[] = [];
  const endBy = performance.now() + seconds * 1000;
  for (let i = 0; i < CYCLES && performance.now() < endBy; i++) {
    const startedAt = performance.now();
    const claimed = await claimDirect(batch, ledger.handler);
    times.push(performance.now() - startedAt);
    await topUp(claimed);
  }
  return times;
}

/** The system's own worker at concurrency 1; ms between consecutive job starts. */
async function workerCycles(system: QueueSystem, ledger: JobLedger, seconds: number): Promise<number[]> {
  const first = ledger.startTimes.length;
  const workers = await system.startWorkers({ concurrency: 1, handler: ledger.handler });
  await ledger.whenStarted(ledger.started + CYCLES + 1, seconds * 1000);
  await stopWorkers(workers, system);
  const starts = ledger.startTimes.slice(first);
  return starts.slice(1).map((at, i) => at - starts[i]!);
}

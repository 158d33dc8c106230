import pg from 'pg';
import { STANDARD_CONCURRENCY } from '../config';
import { JobLedger } from '../ledger';
import { progress } from '../progress';
import { Results } from '../results';
import { formatNumber } from '../stats';
import { SETUPS } from '../systems/types';
import { burnDownBacklog } from './burn-down';
import { repetitions, reportRep, startsPerSecondUntil, stopAndGate, withSystem, type Workload } from './harness';

/** Shares of the backlog: warm-up to the first, "before" to the second, "during" to the third. */
const WARM_UP_SHARE = 0.1;
const BEFORE_SHARE = 0.45;
const DURING_SHARE = 0.9;
const WARM_UP_MAX_MS = 3000;

/**
 * (h) A held snapshot under steady load. One worker process (standard
 * concurrency) drains a copy of the burn-down backlog. After a warm-up, the
 * "before" window counts jobs started per second; then a separate
 * connection opens a REPEATABLE READ transaction, runs one SELECT and sits
 * idle in it (holding back the xmin horizon, so vacuum can remove no row
 * that died after it), and the "during" window counts again. Each window
 * ends when its share of the backlog has started, or after the window time
 * (so a slow system is measured too).
 */
export const heldSnapshotWorkload: Workload = async (context) => {
  const { scale } = context.options;
  const windowMs = scale.snapshotWindowSeconds * 1000;
  const results = new Results();
  for (const setup of SETUPS) {
    progress(`(h) held snapshot · ${setup}: windows of at most ${scale.snapshotWindowSeconds} s`);
    for (const rep of repetitions(context)) {
      for (const driver of context.drivers) {
        const backlog = await burnDownBacklog(context, driver);
        const share = (fraction: number) => Math.round(backlog.jobs * fraction);
        await withSystem(
          context,
          driver,
          setup,
          'snapshot',
          async (system, db) => {
            const ledger = JobLedger.fromBacklog(backlog.jobs);
            const workers = await system.startWorkers({ concurrency: STANDARD_CONCURRENCY, handler: ledger.handler });
            await ledger.whenStarted(share(WARM_UP_SHARE), WARM_UP_MAX_MS);
            const before = await startsPerSecondUntil(ledger, share(BEFORE_SHARE), windowMs);
            const holder = new pg.Client({ connectionString: db.url });
            await holder.connect();
            await holder.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
            await holder.query('SELECT 1');
            const during = await startsPerSecondUntil(ledger, share(DURING_SHARE), windowMs);
            await holder.query('COMMIT');
            await holder.end();
            const gate = await stopAndGate(workers, system, ledger);
            results.recordAll(
              {
                system: driver.name,
                setup,
                variant: `${STANDARD_CONCURRENCY} workers draining ${backlog.jobs.toLocaleString('en-US')} jobs`,
              },
              gate,
              [
                { metric: 'jobs/s before', better: 'higher', value: before },
                { metric: 'jobs/s with snapshot held', better: 'higher', value: during },
                { metric: 'held / before', better: 'higher', value: during / before },
              ],
              { ran: ledger.started },
            );
            reportRep(
              `${driver.name} ${setup}`,
              rep,
              context,
              gate,
              `${formatNumber(before)} jobs/s before, ${formatNumber(during)} with the snapshot held`,
            );
          },
          backlog,
        );
      }
    }
  }
  return {
    id: 'snapshot',
    title: '(h) Throughput while a snapshot is held',
    method: [
      `One worker process (concurrency ${STANDARD_CONCURRENCY}) drains a copy of the burn-down backlog. After a warm-up ` +
        `(${WARM_UP_SHARE * 100}% of the jobs, at most ${WARM_UP_MAX_MS / 1000} s), jobs started per second are counted until ` +
        `${BEFORE_SHARE * 100}% of the backlog has started; then another connection runs ` +
        '`BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT 1` and stays idle in that transaction, holding back the xmin horizon ' +
        `(vacuum can remove no row that dies after it), while the count goes on until ${DURING_SHARE * 100}% have started. ` +
        `Each window also ends after ${scale.snapshotWindowSeconds} s, so slow systems are measured over that time.`,
    ],
    parameters: {
      windowSeconds: scale.snapshotWindowSeconds,
      concurrency: STANDARD_CONCURRENCY,
      shares: [WARM_UP_SHARE, BEFORE_SHARE, DURING_SHARE],
    },
    measurements: results.measurements,
  };
};

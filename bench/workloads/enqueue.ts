import { BULK_SIZE, PRODUCERS } from '../config';
import { JobLedger } from '../ledger';
import { progress } from '../progress';
import { Results } from '../results';
import { formatNumber } from '../stats';
import { repetitions, reportRep, withSystem, type Workload } from './harness';
import { enqueueAll } from './produce';

/**
 * (a) Enqueue throughput: jobs per second from 8 concurrent callers, one job
 * per call and 1,000 per call (each system's batch API). Enqueueing reads
 * none of the worker settings, so each system runs in its defaults only.
 */
export const enqueueWorkload: Workload = async (context) => {
  const { scale } = context.options;
  const results = new Results();
  const variants = [
    { variant: 'one job per call', perCall: 1, jobs: scale.enqueueSingleJobs },
    { variant: `${BULK_SIZE.toLocaleString('en-US')} jobs per call`, perCall: BULK_SIZE, jobs: scale.enqueueBulkJobs },
  ] as const;
  for (const { variant, perCall, jobs } of variants) {
    progress(`(a) enqueue · ${variant}: ${jobs.toLocaleString('en-US')} jobs from ${PRODUCERS} callers`);
    for (const rep of repetitions(context)) {
      for (const driver of context.drivers) {
        await withSystem(context, driver, 'defaults', 'enqueue', async (system) => {
          const ledger = new JobLedger();
          const ms = await enqueueAll(system, ledger, ledger.allocate(jobs), { callers: PRODUCERS, perCall });
          const gate = ledger.gate(await system.inventory());
          const perSecond = (jobs * 1000) / ms;
          results.recordAll(
            { system: driver.name, setup: 'defaults', variant },
            gate,
            [{ metric: 'jobs/s', better: 'higher', value: perSecond }],
            {
              jobs,
              ms,
            },
          );
          reportRep(`${driver.name} ${variant}`, rep, context, gate, `${formatNumber(perSecond)} jobs/s`);
        });
      }
    }
  }
  return {
    id: 'enqueue',
    title: '(a) Enqueue throughput',
    method: [
      `${PRODUCERS} concurrent callers share one producer pool of ${PRODUCERS} connections and send jobs through each system's own API: ` +
        `skiplock \`enqueue\` / \`enqueueBatch\`, pg-boss \`send\` / \`insert\`, graphile-worker \`addJob\` / \`addJobs\`. ` +
        'The clock runs from the first call to the last commit. No workers run; the gate checks that every job is in the database, waiting.',
      'Enqueueing uses none of the worker settings, so only the defaults setup runs.',
    ],
    parameters: {
      callers: PRODUCERS,
      singleJobs: scale.enqueueSingleJobs,
      bulkJobs: scale.enqueueBulkJobs,
      bulkSize: BULK_SIZE,
    },
    measurements: results.measurements,
  };
};

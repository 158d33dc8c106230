import pg from 'pg';
import { clientQueryable } from '../../src/db/pool';
import { claimBatch } from '../../src/engine/claim-batch';
import { completeMany } from '../../src/engine/complete';
import type { ClaimedJob } from '../../src/engine/types';
import { JobLedger } from '../ledger';
import { progress } from '../progress';
import { Results } from '../results';
import { formatNumber } from '../stats';
import { skiplockDriver } from '../systems/skiplock';
import type { BenchPayload } from '../systems/types';
import { repetitions, reportRep, withSystem, type Workload } from './harness';

const BATCHES = [1, 8, 32, 100] as const;

/**
 * How the loop talks to Postgres. `prepared`: as the Node worker's pg driver
 * sends the engine's statements (named, so parsed once per connection; the
 * claim keeps its plan inside skiplock.claim_batch either way), each its own
 * transaction. `unprepared`: as a driver that cannot keep prepared
 * statements (Neon HTTP, a transaction pooler) sends them. `prepared, one
 * commit per turn`: a change confined to the caller, measured as evidence
 * for the engine: the previous batch's completion and the next claim share
 * one transaction, so one WAL flush per turn instead of two.
 */
const MODES = ['prepared', 'unprepared', 'prepared, one commit per turn'] as const;
type Mode = (typeof MODES)[number];

/**
 * (4) The ceiling: skiplock's claim and complete statements in a tight loop
 * on one connection, nothing around them (no worker, no heartbeats, no
 * pool): what the worker in (b) is measured against.
 */
export const ceilingWorkload: Workload = async (context) => {
  const { scale } = context.options;
  const results = new Results();
  const jobs = scale.ceilingJobs;
  for (const mode of MODES) {
    for (const batch of BATCHES) {
      const variant = `${mode}, claim ${batch}`;
      progress(`(4) ceiling · skiplock · ${variant}`);
      for (const rep of repetitions(context)) {
        await withSystem(context, skiplockDriver, 'defaults', 'ceiling', async (system, db) => {
          const ledger = new JobLedger();
          await system.fill({ firstN: ledger.reserve(jobs), waiting: jobs, finished: 0 });
          ledger.recordEnqueued(jobs);
          const client = new pg.Client({ connectionString: db.url });
          await client.connect();
          const startedAt = performance.now();
          const loop = await tightLoop(client, mode, batch, ledger, startedAt + scale.ceilingSeconds * 1000).finally(
            () => client.end(),
          );
          const perSecond = (ledger.started * 1000) / (performance.now() - startedAt);
          const checked = ledger.gate(await system.inventory());
          const problems = [
            ...checked.problems,
            ...(loop.stale > 0 ? [`${loop.stale} completions found their lease taken`] : []),
          ];
          const gate = { ...checked, passed: problems.length === 0, problems };
          results.recordAll({ system: 'skiplock', setup: 'defaults', variant }, gate, [
            { metric: 'jobs/s', better: 'higher', value: perSecond, ...(loop.ranDry ? { flag: 'queue ran dry' } : {}) },
          ]);
          reportRep(`skiplock ${variant}`, rep, context, gate, `${formatNumber(perSecond)} jobs/s`);
        });
      }
    }
  }
  return {
    id: 'ceiling',
    title: "(4) Ceiling: skiplock's statements in a tight loop",
    method: [
      `${jobs.toLocaleString('en-US')} jobs are bulk-inserted; then one loop on one pg connection runs \`claimBatch\` ` +
        `(the worker's claim statement, its types filter included) and \`completeMany\` for the jobs it got, for ${scale.ceilingSeconds} s. ` +
        'Jobs per second are the jobs claimed and completed over the wall time. A worker at concurrency c claims at most c jobs per ' +
        'statement, so "claim c" is the floor for the worker at concurrency c in (b).',
      '"prepared" sends the statements as the Node worker\'s pg driver does (named prepared statements, parsed once per ' +
        'connection); "unprepared" as a driver that cannot keep them (Neon HTTP, a transaction pooler) does. ' +
        '"prepared, one commit per turn" also wraps the completion of one batch and the claim of the next in one transaction: ' +
        'a change a caller can make without touching the SQL, measured as evidence for the engine.',
    ],
    parameters: { jobs, seconds: scale.ceilingSeconds, batches: [...BATCHES], modes: [...MODES] },
    measurements: results.measurements,
  };
};

interface LoopOutcome {
  ranDry: boolean;
  stale: number;
}

/** Claims and completes until `endBy` (performance.now()) or until the queue is empty. */
async function tightLoop(
  client: pg.Client,
  mode: Mode,
  batch: number,
  ledger: JobLedger,
  endBy: number,
): Promise<LoopOutcome> {
  const db = clientQueryable(client, { preparedStatements: mode !== 'unprepared' });
  const oneCommit = mode === 'prepared, one commit per turn';
  let stale = 0;
  let finished: ClaimedJob[] = [];
  const complete = async () => {
    if (finished.length > 0) stale += (await completeMany(db, finished)).stale.length;
    finished = [];
  };
  while (performance.now() < endBy) {
    if (oneCommit) await db.query({ text: 'BEGIN', params: [] });
    await complete();
    const claimed = await claimBatch(db, { max: batch, workerId: 'ceiling', types: ['bench'] });
    if (oneCommit) await db.query({ text: 'COMMIT', params: [] });
    if (claimed.length === 0) return { ranDry: true, stale };
    for (const job of claimed) await ledger.handler(job.payload as unknown as BenchPayload);
    finished = claimed;
    if (!oneCommit) await complete();
  }
  await complete();
  return { ranDry: false, stale };
}

import { pgDb } from '../../src/db/pg';
import type { GateResult } from '../ledger';
import { progress } from '../progress';
import { Results, type Figure } from '../results';
import { formatNumber } from '../stats';
import { adminHeaders } from '../worker-stack';
import { startWorkerdStack } from '../workerd-stack';
import { burnDown, enqueueBurst, type WorkerTarget } from '../worker-workloads';
import { cpuPer, withCpu } from '../cpu';
import { inFreshDatabase } from '../postgres';
import { repetitions, reportRep, type Workload } from './harness';

/** The drains at once: alone, and the Paid plan's default fan-out. */
const FANOUT_VARIANTS = [
  { variant: 'fan-out off', fanout: '1' },
  { variant: 'fan-out 8', fanout: '8' },
] as const;

/** Every job of `queue` succeeded, once: the burn-down's gate. */
async function everyJobSucceeded(target: WorkerTarget, queue: string, jobs: number): Promise<GateResult> {
  const [row] = await target.db.query<{ succeeded: number; other: number; attempts: number }>({
    text: `SELECT count(*) FILTER (WHERE state = 'succeeded')::int AS succeeded, count(*) FILTER (WHERE state <> 'succeeded')::int AS other,
                  coalesce(max(attempts), 0)::int AS attempts
             FROM skiplock.all_jobs WHERE queue = $1`,
    params: [queue],
  });
  const problems = [
    ...(row!.succeeded === jobs ? [] : [`${row!.succeeded} of ${jobs} jobs succeeded`]),
    ...(row!.other === 0 ? [] : [`${row!.other} jobs did not succeed`]),
    ...(row!.attempts <= 1 ? [] : [`a job took ${row!.attempts} attempts`]),
  ];
  return { passed: problems.length === 0, problems, unrecordedCompletions: 0 };
}

/**
 * (w) Through the Worker alone: the reference Worker bundled as `wrangler
 * deploy` would, served by workerd (through Miniflare, no dev server), its
 * cron fired every second, reaching Postgres through the Neon driver and the
 * local proxy. skiplock only: the other systems have no Worker.
 */
export const workersWorkload: Workload = async (context) => {
  const { scale } = context.options;
  const results = new Results();
  for (const rep of repetitions(context)) {
    for (const { variant, fanout } of FANOUT_VARIANTS) {
      await inFreshDatabase(context.server, 'skiplock_workers', async (database) => {
        const workerd = await startWorkerdStack(database.url, { DRAIN_FANOUT: fanout });
        const db = pgDb(database.url, { max: 1 });
        const target: WorkerTarget = {
          api: workerd.url,
          headers: adminHeaders,
          db,
          async transactions() {
            const { rows } = await database.probe.query<{ count: string }>(
              'SELECT xact_commit + xact_rollback AS count FROM pg_stat_database WHERE datname = $1',
              [database.name],
            );
            return Number(rows[0]!.count);
          },
        };
        try {
          for (const [kind, job] of [
            ['no-op', { type: 'noop' }],
            ['50 ms I/O', { type: 'sleep', payload: { ms: 50 } }],
          ] as const) {
            const queue = `bench-${kind.replace(/\W+/g, '-')}`;
            const ran = await burnDown(target, queue, job, scale.workersJobs);
            const gate = await everyJobSucceeded(target, queue, scale.workersJobs);
            results.recordAll({ system: 'skiplock', setup: 'defaults', variant }, gate, [
              { metric: `${kind} jobs/s`, better: 'higher', value: ran.jobsPerSecond },
              { metric: `statements per ${kind} job`, better: 'lower', value: ran.statementsPerJob },
            ]);
            reportRep(
              `skiplock Worker ${kind}, ${variant}`,
              rep,
              context,
              gate,
              `${formatNumber(ran.jobsPerSecond)} jobs/s`,
            );
          }
          const burst = await withCpu(context.cpu, () =>
            enqueueBurst(target, 'bench-burst', { clients: 64, seconds: scale.workersBurstSeconds }),
          );
          const gate = await everyJobSucceeded(target, 'bench-burst', burst.result.enqueued);
          const failed: GateResult =
            burst.result.failed === 0
              ? gate
              : { ...gate, passed: false, problems: [...gate.problems, `${burst.result.failed} enqueues failed`] };
          const perRequest = cpuPer(burst.cpu, burst.result.enqueued + burst.result.failed);
          const figures: Figure[] = [
            { metric: 'enqueue requests/s', better: 'higher', value: burst.result.enqueuesPerSecond },
            { metric: 'enqueue p50 ms', better: 'lower', value: burst.result.latencyMs.p50 },
            { metric: 'enqueue p99 ms', better: 'lower', value: burst.result.latencyMs.p99 },
            { metric: 'enqueue to start p50 ms', better: 'lower', value: burst.result.enqueueToStartMs.p50 },
            { metric: 'workerd CPU ms per enqueue request', better: 'lower', value: perRequest.workerd! },
          ];
          results.recordAll({ system: 'skiplock', setup: 'defaults', variant }, failed, figures, {
            cpuMsPerRequest: {
              workerd: perRequest.workerd ?? null,
              node: perRequest.node ?? null,
              postgres: perRequest.postgres ?? null,
            },
          });
          reportRep(
            `skiplock Worker enqueue burst, ${variant}`,
            rep,
            context,
            failed,
            `${formatNumber(burst.result.enqueuesPerSecond)} requests/s`,
          );
        } finally {
          await db.close();
          await workerd.stop();
        }
      });
    }
  }
  progress('(w) through the Worker: done');
  return {
    id: 'workers',
    title: '(w) Through the Worker alone (workerd, no dev server)',
    method: [
      'The reference Worker is bundled as `wrangler deploy --dry-run` writes it and served by workerd through Miniflare: requests go straight ' +
        "to workerd, with no wrangler process or proxy Worker. Its database is a fresh one on the benchmark's server, reached by the Neon " +
        'HTTP driver through the local Neon proxy, which runs in the benchmark process. The cron is fired every second; no Node worker runs.',
      `Burn-downs: ${scale.workersJobs.toLocaleString('en-US')} jobs enqueued over HTTP in batches of 1,000, timed until all finished; ` +
        'no-op jobs, then jobs that wait 50 ms. Statements are the database transactions, less the harness reads.',
      `The burst: 64 clients enqueue single no-op jobs for ${scale.workersBurstSeconds} s. workerd's CPU per request is read from /proc ` +
        "and includes its fast-path drains' share. Each figure's gate: every job succeeded, in one attempt.",
      'skiplock only: pg-boss and graphile-worker have no Worker to measure.',
    ],
    parameters: {
      jobs: scale.workersJobs,
      burstClients: 64,
      burstSeconds: scale.workersBurstSeconds,
      fanout: FANOUT_VARIANTS.map((v) => v.variant),
    },
    measurements: results.measurements,
  };
};

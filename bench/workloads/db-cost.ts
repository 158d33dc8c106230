import { PRODUCERS, STANDARD_CONCURRENCY } from '../config';
import {
  compactTables,
  relationSizes,
  statementCounter,
  tableFootprint,
  walBytesSince,
  walPosition,
  type RelationSize,
  type StatementCount,
} from '../db-metrics';
import { JobLedger } from '../ledger';
import { inFreshDatabase, type BenchDatabase } from '../postgres';
import { progress } from '../progress';
import { Results } from '../results';
import { formatNumber } from '../stats';
import { SETUPS } from '../systems/types';
import { repetitions, reportRep, sleep, stopWorkers, type Workload } from './harness';
import { enqueueAll } from './produce';

/** Statistics reach the server up to a second after a backend's last transaction. */
const STATS_SETTLE_MS = 1500;
/** How many of the most frequent statements the JSON keeps per phase. */
const TOP_STATEMENTS = 8;
/** How many of the largest relations the JSON keeps, after the run and after compaction. */
const TOP_RELATIONS = 8;

/**
 * (g) Database cost per job, in two phases on a fresh database: the jobs
 * are enqueued one per call (the common case: one request, one job), then
 * one worker process drains them. Each phase counts statements (round
 * trips) and WAL bytes per job; after both, with every connection closed,
 * the bytes the jobs added to the system's tables and their dead tuples;
 * then, the tables compacted, the bytes the finished jobs keep. Both are
 * net of the system's empty schema, which would otherwise weigh on a small
 * run's figure, and the run is large enough that a page more or less does
 * not move them.
 */
export const dbCostWorkload: Workload = async (context) => {
  const { scale } = context.options;
  const jobs = scale.costJobs;
  const results = new Results();
  let source = '';
  for (const setup of SETUPS) {
    progress(`(g) database cost · ${setup}: ${jobs.toLocaleString('en-US')} jobs`);
    for (const rep of repetitions(context)) {
      for (const driver of context.drivers) {
        await inFreshDatabase(context.server, `${driver.name}_cost`, async (db) => {
          const ledger = new JobLedger();
          const counter = statementCounter(db);
          source = counter.source;
          const system = await driver.open(db.url, setup);
          const empty = await tableFootprint(db, system.schema);
          const { enqueuePhase, workPhase, gate } = await (async () => {
            try {
              const enqueuePhase = await measurePhase(db, counter, async () => {
                await enqueueAll(system, ledger, ledger.allocate(jobs), { callers: PRODUCERS, perCall: 1 });
              });
              const workPhase = await measurePhase(db, counter, async () => {
                const workers = await system.startWorkers({
                  concurrency: STANDARD_CONCURRENCY,
                  handler: ledger.handler,
                });
                await ledger.whenStarted(jobs, scale.costCapSeconds * 1000);
                await stopWorkers(workers, system);
              });
              return { enqueuePhase, workPhase, gate: ledger.gate(await system.inventory()) };
            } finally {
              await system.close();
            }
          })();
          const capped = ledger.started < jobs ? { flag: `capped at ${scale.costCapSeconds} s` } : {};
          await sleep(STATS_SETTLE_MS);
          const tables = await tableFootprint(db, system.schema);
          const relations = await relationSizes(db, system.schema);
          await compactTables(db, system.schema);
          const kept = await tableFootprint(db, system.schema);
          const keptRelations = await relationSizes(db, system.schema);
          results.recordAll(
            { system: driver.name, setup, variant: `${jobs.toLocaleString('en-US')} jobs` },
            gate,
            [
              { metric: 'statements per job, enqueue', better: 'lower', value: enqueuePhase.statements / jobs },
              {
                metric: 'statements per job, work',
                better: 'lower',
                value: workPhase.statements / ledger.started,
                ...capped,
              },
              { metric: 'WAL bytes per job, enqueue', better: 'lower', value: enqueuePhase.walBytes / jobs },
              {
                metric: 'WAL bytes per job, work',
                better: 'lower',
                value: workPhase.walBytes / ledger.started,
                ...capped,
              },
              {
                metric: 'table + index bytes each job adds',
                better: 'lower',
                value: (tables.bytes - empty.bytes) / jobs,
              },
              {
                metric: 'bytes a finished job keeps',
                better: 'lower',
                value: (kept.bytes - empty.bytes) / jobs,
                ...capped,
              },
              { metric: 'dead tuples after', better: 'lower', value: tables.deadTuples },
            ],
            {
              tables: { ...tables },
              emptySchemaBytes: empty.bytes,
              keptBytes: kept.bytes,
              largestRelations: largest(relations),
              largestRelationsKept: largest(keptRelations),
              enqueueStatements: topStatements(enqueuePhase.counts),
              workStatements: topStatements(workPhase.counts),
            },
          );
          reportRep(
            `${driver.name} ${setup}`,
            rep,
            context,
            gate,
            `${formatNumber(enqueuePhase.statements / jobs)} + ${formatNumber(workPhase.statements / ledger.started)} statements/job, ` +
              `${formatNumber(enqueuePhase.walBytes / jobs)} + ${formatNumber(workPhase.walBytes / ledger.started)} WAL bytes/job, ` +
              `${formatNumber((tables.bytes - empty.bytes) / jobs)} bytes/job added, ${formatNumber((kept.bytes - empty.bytes) / jobs)} kept, ` +
              `${tables.deadTuples} dead, ${ledger.started} of ${jobs} ran`,
          );
        });
      }
    }
  }
  return {
    id: 'cost',
    title: '(g) Database cost per job',
    method: [
      `Phase 1: ${PRODUCERS} callers enqueue ${jobs.toLocaleString('en-US')} jobs one per call. Phase 2: one worker process ` +
        `(concurrency ${STANDARD_CONCURRENCY}) runs them, for at most ${scale.costCapSeconds} s, then stops; its figures are per job that ran. Statements per job count every statement the system ran in ` +
        `the phase, maintenance and polling included (source: ${source || 'pg_stat_statements, else client round trips'}; each is one round trip). ` +
        'WAL bytes per job are the difference of pg_current_wal_lsn() across the phase.',
      `After both phases and once every connection of the system has closed: the bytes each job added to the tables in the system's schema ` +
        "(heap, indexes, TOAST; their total less the empty schema's, per job enqueued), and their dead tuples (autovacuum runs with the server's defaults). " +
        'Then every table of the schema is compacted (VACUUM FULL: live rows only, indexes rebuilt), and what is left, less the empty schema, per job, ' +
        'is the bytes a finished job keeps over its retention period: the dead space of the first figure is reused by later jobs, the kept rows are not. ' +
        'skiplock keeps every finished job and its events; pg-boss keeps finished jobs (completed ones for 7 days by default); graphile-worker deletes them. ' +
        'A system capped before all its jobs ran keeps its waiting jobs too, and its figure says so.',
    ],
    parameters: {
      jobs,
      capSeconds: scale.costCapSeconds,
      producers: PRODUCERS,
      concurrency: STANDARD_CONCURRENCY,
      statementSource: source,
    },
    measurements: results.measurements,
  };
};

interface PhaseCost {
  statements: number;
  walBytes: number;
  counts: StatementCount[];
}

async function measurePhase(
  db: BenchDatabase,
  counter: ReturnType<typeof statementCounter>,
  phase: () => Promise<void>,
): Promise<PhaseCost> {
  await counter.reset();
  const wal = await walPosition(db);
  await phase();
  const walBytes = await walBytesSince(db, wal);
  const counts = await counter.read();
  return { statements: counts.reduce((sum, count) => sum + count.calls, 0), walBytes, counts };
}

function largest(relations: readonly RelationSize[]): Array<{ relation: string; bytes: number }> {
  return relations.slice(0, TOP_RELATIONS).map(({ relation, bytes }) => ({ relation, bytes }));
}

function topStatements(counts: readonly StatementCount[]): Array<{ calls: number; query: string }> {
  return counts
    .slice(0, TOP_STATEMENTS)
    .map(({ calls, query }) => ({ calls, query: query.replace(/\s+/g, ' ').slice(0, 160) }));
}

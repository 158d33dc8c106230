/**
 * `DATABASE_URL=postgres://… npx tsx bench/metrics-scrape.ts`: what one
 * Prometheus scrape (`queueMetrics`, the statement behind GET /metrics)
 * costs with WAITING jobs waiting (1,000,000 by default). A fresh database
 * on DATABASE_URL's server (else an embedded Postgres), migrated; the jobs
 * inserted with generate_series over 20 queues and 5 tenants (80% ready,
 * 10% scheduled an hour ahead, 10% retrying), 2,000 more claimed and 500
 * of those parked, ENDED attempts ended (5,000; 80% succeeded, 10% failed
 * and retried, 10% failed for good), ENDED / 20 more cut off by a lapsed
 * lease and as many waiting jobs expired, all in the hour the rollup has not read
 * yet, which a scrape sums; then the ledger folded as housekeeping folds it,
 * VACUUM ANALYZE, WARM_UP scrapes, and SCRAPES timed scrapes. Prints the
 * median, min, p90 and max in ms. The database is dropped afterwards.
 */
import type pg from 'pg';
import { pgDb } from '../src/db/pg';
import { expireJobs } from '../src/engine/expire-jobs';
import { compactJobCounts, queueMetrics } from '../src/engine/metrics';
import { reapExpiredLeases } from '../src/engine/reclaim';
import { loadMigrations } from '../src/migrate/load';
import { migrate } from '../src/migrate/runner';
import { inFreshDatabase, startBenchServer } from './postgres';
import { median, percentile } from './stats';

const env = (name: string, fallback: number) => Number(process.env[name] ?? fallback);
const WAITING = env('WAITING', 1_000_000);
const SCRAPES = env('SCRAPES', 21);
const WARM_UP = env('WARM_UP', 3);
/** Attempts that end (80% succeeded) before the scrapes, all in the hour the rollup has not read. */
const ENDED = env('ENDED', 5_000);

const seedSql = [
  `INSERT INTO skiplock.jobs (queue, type, tenant, state, run_at)
   SELECT 'queue-' || (i % 20), 'work', 'tenant-' || (i / 20 % 5),
          CASE i % 10 WHEN 0 THEN 'scheduled' WHEN 1 THEN 'retrying' ELSE 'queued' END,
          CASE i % 10 WHEN 0 THEN now() + interval '1 hour' WHEN 1 THEN now() + interval '1 minute'
                      ELSE now() - (i % 3600) * interval '1 second' END
   FROM generate_series(1, $1::integer) AS i`,
  // Running and parked jobs: inserted waiting (a job is never inserted running), then claimed by hand.
  `INSERT INTO skiplock.jobs (queue, type, tenant, run_at)
   SELECT 'queue-' || (i % 20), 'work', 'tenant-' || (i / 20 % 5), now() - interval '1 day'
   FROM generate_series(1, $2::integer + 2000) AS i`,
  `UPDATE skiplock.jobs SET state = 'running', attempts = 1, started_at = now(), first_started_at = now(),
          worker_id = 'bench', lease_token = gen_random_uuid(), lease_expires_at = now() + interval '1 hour'
   WHERE run_at = (SELECT min(run_at) FROM skiplock.jobs)`,
  // 5,000 attempts end: the statistics read them from the history and the events.
  `SELECT count(*) FROM (SELECT array_agg(id) AS ids, array_agg(lease_token) AS tokens, array_agg(1000::float8) AS held
                         FROM (SELECT id, lease_token FROM skiplock.jobs WHERE state = 'running' LIMIT $2::integer * 4 / 5) AS j) AS a,
          skiplock.complete_jobs(a.ids, a.tokens, a.held, '[]', false)`,
  `SELECT count(*) FROM skiplock.fail_jobs((SELECT jsonb_agg(jsonb_build_object('id', id, 'leaseToken', lease_token, 'error', 'bench',
                                                          'forGood', n % 2 = 0))
   FROM (SELECT id, lease_token, row_number() OVER () AS n FROM skiplock.jobs WHERE state = 'running'
         LIMIT $2::integer / 5) AS j), false)`,
  `UPDATE skiplock.jobs SET state = 'parked', worker_id = NULL, lease_token = NULL, lease_expires_at = NULL,
          run_at = now() + interval '1 day'
   WHERE id IN (SELECT id FROM skiplock.jobs WHERE state = 'running' LIMIT 500)`,
  // Leases that lapse and jobs that expire unstarted, for the reaper and the expiry below.
  `UPDATE skiplock.jobs SET lease_expires_at = now() - interval '1 second'
   WHERE id IN (SELECT id FROM skiplock.jobs WHERE state = 'running' LIMIT $2::integer / 20)`,
  `UPDATE skiplock.jobs SET expires_at = now() - interval '1 second'
   WHERE id IN (SELECT id FROM skiplock.jobs WHERE state = 'queued' LIMIT $2::integer / 20)`,
];

/** EXPLAIN=1: the plan of the statements inside skiplock.queue_metrics, by auto_explain. */
async function explainScrape(pool: pg.Pool): Promise<void> {
  const client = await pool.connect();
  try {
    client.on('notice', (notice) => console.log(notice.message));
    await client.query(`LOAD 'auto_explain'`);
    for (const setting of [
      'log_min_duration = 0',
      'log_nested_statements = on',
      'log_analyze = on',
      'log_level = notice',
    ]) {
      await client.query(`SET auto_explain.${setting}`);
    }
    await client.query('SELECT count(*) FROM skiplock.queue_metrics(NULL)');
  } finally {
    client.release();
  }
}

const server = await startBenchServer(process.env.DATABASE_URL);
try {
  await inFreshDatabase(server, 'metrics', async (database) => {
    const db = pgDb(database.url, { max: 1 });
    try {
      await migrate(db, await loadMigrations());
      const seeding = Date.now();
      for (const text of seedSql) {
        const params = text.includes('$2') ? [ENDED] : text.includes('$1') ? [WAITING] : [];
        await db.query({ text: text.replace(/\$2/g, '$1'), params });
      }
      await reapExpiredLeases(db);
      await expireJobs(db);
      const folded = await compactJobCounts(db);
      await database.probe.query('VACUUM ANALYZE');
      console.log(
        `seeded in ${((Date.now() - seeding) / 1000).toFixed(1)} s; ledger ${folded.rowsBefore} -> ${folded.rowsAfter} rows`,
      );
      let rows = 0;
      for (let n = 0; n < WARM_UP; n++) rows = (await queueMetrics(db)).queues.length;
      const times: number[] = [];
      for (let n = 0; n < SCRAPES; n++) {
        const started = performance.now();
        await queueMetrics(db);
        times.push(performance.now() - started);
      }
      const [check] = await db.query<{ waiting: number; ended: string }>({
        text: `SELECT sum(waiting)::float8 AS waiting,
                      format('%s succeeded, %s retried, %s failed, %s lease lapses, %s expired', sum(succeeded), sum(retried),
                             sum(failed), sum(lease_expired), sum(expired)) AS ended
               FROM skiplock.queue_metrics(NULL)`,
        params: [],
      });
      if (process.env.EXPLAIN) await explainScrape(database.probe);
      const ms = (value: number) => value.toFixed(2);
      console.log(
        `${check!.waiting} waiting jobs, ${rows} queue and tenant rows, ${check!.ended}; ${SCRAPES} scrapes: median ${ms(median(times))} ms, ` +
          `min ${ms(Math.min(...times))}, p90 ${ms(percentile(times, 0.9))}, max ${ms(Math.max(...times))}`,
      );
    } finally {
      await db.close();
    }
  });
} finally {
  await server.stop();
}

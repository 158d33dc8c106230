/**
 * Where a claim and a completion spend their time in one database of
 * bench/parked-jobs.ts: the statements inside skiplock.claim_batch and
 * complete_jobs (and its triggers) from pg_stat_statements with nested
 * statements tracked, and the plans auto_explain logs for one claim, one
 * empty claim and one completion, written to $TMPDIR/skiplock-parked-explain-<label>.txt.
 * Needs a superuser (both are session settings only a superuser may make)
 * and, for the statements, pg_stat_statements preloaded, as on the
 * benchmark's embedded server.
 */
import { writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import type { Queryable } from '../src/db/types';
import { claimBatch } from '../src/engine/claim-batch';
import { completeMany } from '../src/engine/complete';
import { enqueue, enqueueBatch } from '../src/engine/enqueue';
import { nextDueAt } from '../src/engine/next-due';
import type { BenchDatabase } from './postgres';

const CYCLES = 200;
const BACKLOG = 2000;

/** What pg_stat_statements counted since its reset, nested statements included, by total time. */
async function printStatements(client: pg.Client, title: string): Promise<void> {
  const { rows } = await client.query<{
    calls: string;
    mean_ms: number;
    total_ms: number;
    hits: string;
    query: string;
  }>(
    `SELECT calls, round(mean_exec_time::numeric, 4)::float8 AS mean_ms, round(total_exec_time::numeric, 1)::float8 AS total_ms,
            shared_blks_hit AS hits, regexp_replace(left(query, 150), '\\s+', ' ', 'g') AS query
     FROM pg_stat_statements
     WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND query NOT ILIKE '%pg_stat_statements%'
     ORDER BY total_exec_time DESC LIMIT 25`,
  );
  console.log(`\n${title}: pg_stat_statements, nested statements tracked`);
  console.log('calls | mean ms | total ms | buffer hits | statement');
  for (const row of rows) console.log(`${row.calls} | ${row.mean_ms} | ${row.total_ms} | ${row.hits} | ${row.query}`);
}

export async function diagnose(
  database: BenchDatabase,
  label: string,
  jobs: { queue: string; type: string; tenants: readonly string[] },
): Promise<void> {
  const client = new pg.Client({ connectionString: database.url });
  await client.connect();
  const db: Queryable = {
    query: async (q) =>
      (await client.query({ text: q.text, values: [...q.params], ...(q.name ? { name: q.name } : {}) })).rows,
  };
  const cycle = async (n: number) => {
    await enqueue(db, { queue: jobs.queue, type: jobs.type, tenant: 'acme', payload: { n } });
    const claimed = await claimBatch(db, { max: 1, workerId: 'bench-diagnose', types: [jobs.type] });
    await completeMany(db, claimed);
  };
  try {
    for (let i = 0; i < 20; i++) await cycle(-i);
    if (database.statementStats) {
      await client.query('SELECT pg_stat_statements_reset()');
      await client.query("SET pg_stat_statements.track = 'all'");
      for (let i = 0; i < CYCLES; i++) await cycle(i);
      for (let i = 0; i < CYCLES; i++) await claimBatch(db, { max: 1, workerId: 'bench-diagnose', types: [jobs.type] });
      await printStatements(client, `${label}: ${CYCLES} enqueue+claim+complete cycles and ${CYCLES} empty claims`);
      await client.query('SELECT pg_stat_statements_reset()');
      const backlog = Array.from({ length: BACKLOG }, (_, n) => ({
        queue: jobs.queue,
        type: jobs.type,
        tenant: jobs.tenants[n % jobs.tenants.length]!,
        payload: { n },
      }));
      for (let start = 0; start < BACKLOG; start += 1000) await enqueueBatch(db, backlog.slice(start, start + 1000));
      for (;;) {
        const claimed = await claimBatch(db, { max: 10, workerId: 'bench-diagnose', types: [jobs.type] });
        if (claimed.length === 0) break;
        await completeMany(db, claimed);
      }
      await printStatements(client, `${label}: a backlog of ${BACKLOG} jobs claimed 10 at a time and completed`);
      await client.query("SET pg_stat_statements.track = 'top'");
    }
    const plans: string[] = [];
    client.on('notice', (notice) => plans.push(notice.message ?? ''));
    await client.query("LOAD 'auto_explain'");
    for (const setting of [
      'auto_explain.log_min_duration = 0',
      'auto_explain.log_analyze = on',
      'auto_explain.log_buffers = on',
      'auto_explain.log_nested_statements = on',
      'client_min_messages = log',
    ]) {
      await client.query(`SET ${setting}`);
    }
    plans.push('==== enqueue, claim of 1, completion');
    await cycle(1_000_000);
    plans.push('==== claim of 10 from a backlog of 1000 over the tenants, 20 claims in');
    await client.query('SET client_min_messages = notice');
    await enqueueBatch(
      db,
      Array.from({ length: 1000 }, (_, n) => ({
        queue: jobs.queue,
        type: jobs.type,
        tenant: jobs.tenants[n % jobs.tenants.length]!,
        payload: { n },
      })),
    );
    for (let i = 0; i < 20; i++) {
      await completeMany(db, await claimBatch(db, { max: 10, workerId: 'bench-diagnose', types: [jobs.type] }));
    }
    await client.query('SET client_min_messages = log');
    await claimBatch(db, { max: 10, workerId: 'bench-diagnose', types: [jobs.type] });
    await client.query('SET client_min_messages = notice');
    for (;;) {
      const claimed = await claimBatch(db, { max: 1000, workerId: 'bench-diagnose', types: [jobs.type] });
      if (claimed.length === 0) break;
      await completeMany(db, claimed);
    }
    await client.query('SET client_min_messages = log');
    plans.push('==== empty claim');
    await claimBatch(db, { max: 1, workerId: 'bench-diagnose', types: [jobs.type] });
    plans.push('==== next due');
    await nextDueAt(db, { types: [jobs.type], retentionSeconds: 7 * 86_400 });
    await client.query('SET client_min_messages = notice');
    const file = join(tmpdir(), `skiplock-parked-explain-${label.slice(0, 1)}.txt`);
    await writeFile(file, plans.join('\n\n'));
    console.log(
      `${label}: auto_explain plans of a claim, a claim from a backlog, an empty claim and a completion in ${file}`,
    );
  } finally {
    await client.end();
  }
}

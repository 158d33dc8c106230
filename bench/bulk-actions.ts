/**
 * `npm run bench:bulk`: does a bulk action on TARGETS jobs block a drain
 * running beside it? On the benchmark's server (DATABASE_URL, else an
 * embedded Postgres as `npm run bench` starts).
 *
 * Each round, for each action (a cancel of TARGETS waiting jobs, a retry of
 * TARGETS failed ones), in a queue of their own:
 * - A: CLAIMERS connections drain the queue `work` (claims of 100 of a
 *   backlog of BACKLOG jobs, each completed) for as long as B's action took
 *   the round before (BASELINE_SECONDS the first time);
 * - B: the same drain while one connection runs the bulk action over the
 *   TARGETS jobs, in its batches of BATCH, pausing PAUSE times each
 *   batch's time between them (the default pauseFactor, 1).
 * Jobs/s of the drain in A and in B, B/A (the issue asks for 0.7 or more),
 * and the action's own jobs/s. Prints the figures; JSON to
 * $TMPDIR/skiplock-bulk-actions.json.
 */
import { writeFile } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { pgDb } from '../src/db/pg';
import type { Db } from '../src/db/types';
import { bulkAction, type BulkActionName } from '../src/engine/bulk-action';
import { claimBatch } from '../src/engine/claim-batch';
import { completeMany } from '../src/engine/complete';
import { enqueueBatch, type EnqueueInput } from '../src/engine/enqueue';
import { loadMigrations } from '../src/migrate/load';
import { migrate } from '../src/migrate/runner';
import { createDatabase, startBenchServer } from './postgres';
import { median } from './stats';

const env = (name: string, fallback: number) => Number(process.env[name] ?? fallback);
const TARGETS = env('TARGETS', 100_000);
const BACKLOG = env('BACKLOG', 150_000);
const CLAIMERS = env('CLAIMERS', 4);
const ROUNDS = env('ROUNDS', 2);
const BATCH = env('BATCH', 500);
const BASELINE_SECONDS = env('BASELINE_SECONDS', 10);
/** The action's pauseFactor: 1 is the default, 0 runs the batches back to back. */
const PAUSE = env('PAUSE', 1);
const TENANTS = ['acme', 'globex', 'initech', 'umbrella'];

/** TARGETS failed jobs of the queue `dead`, written straight into the history as a failed attempt leaves them. */
const seedFailedSql = /* sql */ `
INSERT INTO skiplock.finished_jobs
  (id, queue, type, tenant, state, priority, run_at, attempts, max_attempts, lease_seconds, backoff_base_seconds,
   backoff_max_seconds, dedup_window_seconds, created_at, first_started_at, started_at, payload, last_error,
   finished_at, run_ms)
SELECT skiplock.uuid_v7(clock_timestamp()), 'dead', 't', (ARRAY['acme', 'globex', 'initech', 'umbrella'])[1 + n % 4],
       'failed', 0, now(), 1, 1, 60, 1, 3600, 0, now(), now(), now(), to_jsonb(n), '{"message": "boom"}', now(), 5
FROM generate_series(1, $1::integer) n`;

async function enqueueMany(db: Db, count: number, fields: Partial<EnqueueInput>): Promise<void> {
  for (let at = 0; at < count; at += 1000) {
    const size = Math.min(1000, count - at);
    await enqueueBatch(
      db,
      Array.from({ length: size }, (_, n) => ({ queue: 'work', tenant: TENANTS[n % 4], payload: n, ...fields })),
    );
  }
}

async function waiting(db: Db, queue: string): Promise<number> {
  const [row] = await db.query<{ jobs: number }>({
    text: "SELECT count(*)::integer AS jobs FROM skiplock.jobs WHERE queue = $1 AND state IN ('queued', 'scheduled')",
    params: [queue],
  });
  return row!.jobs;
}

/** The drain, while `during` runs: jobs/s, and whether the backlog ran dry before the end (the figure is then low). */
async function drainWhile(
  url: string,
  during: () => Promise<unknown>,
): Promise<{ jobsPerSecond: number; dry: boolean }> {
  const claimers = Array.from({ length: CLAIMERS }, () => pgDb(url, { max: 1 }));
  let stop = false;
  let done = 0;
  const started = performance.now();
  const loops = claimers.map(async (db, n) => {
    while (!stop) {
      const jobs = await claimBatch(db, { max: 100, workerId: `bench-${n}`, queues: ['work'] });
      if (jobs.length === 0) {
        await sleep(5);
        continue;
      }
      await completeMany(db, jobs);
      done += jobs.length;
    }
  });
  await during();
  stop = true;
  const seconds = (performance.now() - started) / 1000;
  await Promise.all(loops);
  const dry = (await waiting(claimers[0]!, 'work')) < 1000;
  await Promise.all(claimers.map((db) => db.close()));
  return { jobsPerSecond: done / seconds, dry };
}

interface RoundResult {
  action: BulkActionName;
  baselineJobsPerSecond: number;
  duringJobsPerSecond: number;
  ratio: number;
  actionSeconds: number;
  actionJobsPerSecond: number;
  changed: number;
  backlogRanDry: boolean;
}

async function main(): Promise<void> {
  const server = await startBenchServer(process.env.DATABASE_URL);
  const database = await createDatabase(server, 'bulk');
  const db = pgDb(database.url, { max: 2 });
  const results: RoundResult[] = [];
  try {
    await migrate(db, await loadMigrations());
    let lastSeconds: Partial<Record<BulkActionName, number>> = {};
    for (let round = 1; round <= ROUNDS; round++) {
      for (const action of ['cancel', 'retry'] as const) {
        if (action === 'cancel') await enqueueMany(db, TARGETS, { queue: 'target', delaySeconds: 3600 });
        else await db.query({ text: seedFailedSql, params: [TARGETS] });
        await db.query({ text: 'ANALYZE skiplock.jobs', params: [] });

        await enqueueMany(db, Math.max(0, BACKLOG - (await waiting(db, 'work'))), {});
        const baselineSeconds = lastSeconds[action] ?? BASELINE_SECONDS;
        const baseline = await drainWhile(database.url, () => sleep(baselineSeconds * 1000));

        await enqueueMany(db, Math.max(0, BACKLOG - (await waiting(db, 'work'))), {});
        const actor = pgDb(database.url, { max: 1 });
        let outcome = { changed: 0 };
        let actionSeconds = 0;
        const during = await drainWhile(database.url, async () => {
          const started = performance.now();
          const filter = action === 'cancel' ? { queue: 'target' } : { queue: 'dead' };
          outcome = await bulkAction(actor, { action, filter, batchSize: BATCH, pauseFactor: PAUSE });
          actionSeconds = (performance.now() - started) / 1000;
        });
        await actor.close();
        lastSeconds = { ...lastSeconds, [action]: actionSeconds };
        // What the retry made waiting leaves the next round's live table as it found it.
        if (action === 'retry') await db.query({ text: "DELETE FROM skiplock.jobs WHERE queue = 'dead'", params: [] });

        const result: RoundResult = {
          action,
          baselineJobsPerSecond: baseline.jobsPerSecond,
          duringJobsPerSecond: during.jobsPerSecond,
          ratio: during.jobsPerSecond / baseline.jobsPerSecond,
          actionSeconds,
          actionJobsPerSecond: outcome.changed / actionSeconds,
          changed: outcome.changed,
          backlogRanDry: baseline.dry || during.dry,
        };
        results.push(result);
        console.log(
          `round ${round} ${action.padEnd(6)} drain ${result.baselineJobsPerSecond.toFixed(0)} jobs/s alone, ` +
            `${result.duringJobsPerSecond.toFixed(0)} during (x${result.ratio.toFixed(2)}); ` +
            `the action: ${result.changed} jobs in ${actionSeconds.toFixed(1)} s (${result.actionJobsPerSecond.toFixed(0)}/s)` +
            `${result.backlogRanDry ? ' [the backlog ran dry: raise BACKLOG]' : ''} load ${loadavg()[0]!.toFixed(1)}`,
        );
      }
    }
  } finally {
    await db.close();
    await database.drop();
    await server.stop();
  }
  for (const action of ['cancel', 'retry'] as const) {
    const ratios = results.filter((result) => result.action === action).map((result) => result.ratio);
    console.log(`${action}: median drain ratio x${median(ratios).toFixed(2)} over ${ratios.length} rounds`);
  }
  const file = join(tmpdir(), 'skiplock-bulk-actions.json');
  await writeFile(file, JSON.stringify({ TARGETS, BACKLOG, CLAIMERS, BATCH, PAUSE, results }, null, 2));
  console.log(`JSON: ${file}`);
}

await main();

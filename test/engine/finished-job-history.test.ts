import { describe, expect, it } from 'vitest';
import type { Db } from '../../src/db/types';
import { bulkAction, claimBatch, complete, enqueue, getJob, maintainHistory, setQueue } from '../../src/engine';
import { engineDatabases } from '../support/engine-db';

const open = engineDatabases();
const DAY = 24 * 3600;
const TRACEPARENT = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';

/**
 * How many rows each table of the schema with a job_id column holds for a
 * job, found from the catalog, so a table added later is counted too.
 */
async function rowsNaming(db: Db, id: string): Promise<Record<string, number>> {
  const rows = await db.query<{ name: string; n: number }>({
    text: `SELECT c.relname AS name,
                  (xpath('/row/n/text()', query_to_xml(
                    format('SELECT count(*) AS n FROM skiplock.%I WHERE job_id = %L', c.relname, $1::uuid),
                    false, true, '')))[1]::text::integer AS n
           FROM pg_attribute a
           JOIN pg_class c ON c.oid = a.attrelid
           JOIN pg_namespace s ON s.oid = c.relnamespace
           WHERE s.nspname = 'skiplock' AND a.attname = 'job_id' AND NOT a.attisdropped
             AND c.relkind IN ('r', 'p') AND NOT c.relispartition
           ORDER BY 1`,
    params: [id],
  });
  return Object.fromEntries(rows.map((row) => [row.name, row.n]));
}

/**
 * A finished job with a row in each table that may name one (an event, a
 * step, a link to the job it waited on, its key's row, its trace context,
 * and for `dedupKey` the key it still holds), and a live job with the same
 * kinds of rows, one of them a link to the finished job.
 */
async function finishedWithHistory(db: Db, options: { queue: string; dedupKey?: string }) {
  const enqueued = await enqueue(db, {
    queue: options.queue,
    concurrencyKey: 'account-1',
    traceparent: TRACEPARENT,
    ...(options.dedupKey === undefined ? {} : { dedupKey: options.dedupKey, dedupWindowSeconds: 30 * DAY }),
  });
  const finished = enqueued.job.id;
  const [claimed] = await claimBatch(db, { max: 1, workerId: 'w', queues: [options.queue] });
  expect(claimed!.id).toBe(finished);
  await complete(db, claimed!);
  const live = (await enqueue(db, { queue: 'live', concurrencyKey: 'account-2', traceparent: TRACEPARENT })).job.id;
  await db.query({
    text: `WITH steps AS (
             INSERT INTO skiplock.job_steps (job_id, name, kind, done, result)
             SELECT id, 'charge', 'do', true, '{}' FROM unnest($1::uuid[]) AS id
           ),
           events AS (
             INSERT INTO skiplock.job_events (job_id, kind, attempt) SELECT id, 'released', 1 FROM unnest($1::uuid[]) AS id
           )
           INSERT INTO skiplock.job_links (job_id, other_id, kind, step_name)
           VALUES ($1[1], $1[2], 'dependency', NULL), ($1[2], $1[1], 'child', 'child')`,
    params: [[finished, live]],
  });
  const before = await rowsNaming(db, finished);
  const expected = ['job_events', 'job_links', 'job_steps', 'job_trace_contexts', 'keyed_jobs'];
  if (options.dedupKey !== undefined) expected.push('dedup_keys');
  expect(Object.keys(before).filter((table) => before[table]! > 0)).toEqual(expected.sort());
  return { finished, live, liveRows: await rowsNaming(db, live) };
}

/** As if the hourly statistics had summed everything up to now: pruning never passes them. */
async function rollUp(db: Db): Promise<void> {
  await db.query({ text: 'UPDATE skiplock.attempt_stats_rollup SET rolled_through = now()', params: [] });
}

async function finishedAt(db: Db, id: string, at: string): Promise<void> {
  await db.query({
    text: 'UPDATE skiplock.finished_jobs SET finished_at = $2::timestamptz WHERE id = $1',
    params: [id, at],
  });
}

/** Each way a finished job goes, over a database where it is due to. */
const WAYS: Record<string, (db: Db, id: string) => Promise<void>> = {
  'a bulk delete': async (db, id) => {
    expect(await bulkAction(db, { action: 'delete', filter: { ids: [id] } })).toMatchObject({ changed: 1 });
  },
  'the retention sweep': async (db, id) => {
    await finishedAt(db, id, new Date(Date.now() - 600_000).toISOString());
    await rollUp(db);
    expect(await maintainHistory(db, { retentionSeconds: 7 * DAY })).toMatchObject({ deletedJobs: 1 });
  },
  'a dropped day': async (db, id) => {
    await db.query({
      text: `CREATE TABLE skiplock.finished_jobs_20200101 PARTITION OF skiplock.finished_jobs
             FOR VALUES FROM ('2020-01-01 00:00+00') TO ('2020-01-02 00:00+00')`,
      params: [],
    });
    await finishedAt(db, id, '2020-01-01T12:00:00Z');
    await rollUp(db);
    expect(await maintainHistory(db, { retentionSeconds: DAY })).toMatchObject({ droppedDays: 1 });
  },
  "the default partition's stray rows": async (db, id) => {
    await finishedAt(db, id, new Date(Date.now() - 2 * DAY * 1000).toISOString());
    await rollUp(db);
    expect(await maintainHistory(db, { retentionSeconds: DAY })).toMatchObject({ deletedJobs: 1 });
  },
};

describe('a finished job that goes takes every row that names it, and nothing else', () => {
  for (const [way, remove] of Object.entries(WAYS)) {
    it(`through ${way}`, async () => {
      const { db } = await open('pg');
      // Only a bulk delete takes a job whose dedup key still matches (the sweep keeps it for its window).
      const bulk = way === 'a bulk delete';
      await setQueue(db, 'trivial', { concurrency: null, weight: 1, retentionSeconds: 'none' });
      // The days ahead exist before the job finishes, so it lands in one of them.
      await maintainHistory(db, { retentionSeconds: DAY });
      const { finished, live, liveRows } = await finishedWithHistory(db, {
        queue: way === 'the retention sweep' ? 'trivial' : 'q',
        ...(bulk ? { dedupKey: 'once' } : {}),
      });
      await remove(db, finished);
      expect(await getJob(db, finished)).toBeUndefined();
      const left = await rowsNaming(db, finished);
      expect(left).toEqual(Object.fromEntries(Object.keys(left).map((table) => [table, 0])));
      expect(await rowsNaming(db, live)).toEqual(liveRows);
      expect(await getJob(db, live)).toMatchObject({ status: 'queued' });
      if (bulk) {
        // The freed dedup key is taken by the next enqueue.
        const again = await enqueue(db, { queue: 'q', dedupKey: 'once', dedupWindowSeconds: 30 * DAY });
        expect(again.job.id).not.toBe(finished);
      }
    });
  }
});

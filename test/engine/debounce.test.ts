import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { pgDb } from '../../src/db/pg';
import type { Db, Queryable } from '../../src/db/types';
import { defineJob } from '../../src/drain';
import {
  claimBatch,
  completeMany,
  DedupConflictError,
  enqueue,
  enqueueBatch,
  getJobEvents,
  getJobSteps,
  InvalidInputError,
  queueStats,
  type EnqueueInput,
} from '../../src/engine';
import { engineDatabases } from '../support/engine-db';

const open = engineDatabases();

const debounced = (payload: string, extra: Partial<EnqueueInput> = {}): EnqueueInput => ({
  queue: 'reindex',
  payload,
  debounceKey: 'acct-1',
  debouncePeriodSeconds: 30,
  ...extra,
});

async function count(db: Queryable, where = 'true'): Promise<number> {
  const [row] = await db.query<{ n: number }>({
    text: `SELECT count(*)::integer AS n FROM skiplock.all_jobs WHERE ${where}`,
    params: [],
  });
  return row!.n;
}

/** Moves every waiting job's start to now, as if its period had passed. */
async function due(db: Queryable): Promise<void> {
  await db.query({
    text: `UPDATE skiplock.jobs SET run_at = now(), state = 'queued' WHERE state = 'scheduled'`,
    params: [],
  });
}

const claimAll = (db: Queryable) => claimBatch(db, { max: 100, workerId: 'test', leaseSeconds: 60 });

describe('debounce', () => {
  it('folds a burst into one job with the last payload, its start moved to the period after the latest enqueue', async () => {
    const { db } = await open('pg');
    const first = await enqueue(db, debounced('a', { debounceMaxDelaySeconds: 120 }));
    expect(first).toMatchObject({ deduplicated: false, debounced: false });
    const firstStart = Date.parse(first.job.runAt);
    expect(firstStart - Date.parse(first.job.createdAt)).toBeCloseTo(30_000, -2);

    await new Promise((resolve) => setTimeout(resolve, 20));
    const second = await enqueue(db, debounced('b', { debounceMaxDelaySeconds: 120 }));
    expect(second).toMatchObject({ deduplicated: true, debounced: true, replaced: false });
    expect(second.job).toMatchObject({ id: first.job.id, payload: 'b', status: 'scheduled', dedupKey: 'acct-1' });
    expect(Date.parse(second.job.runAt)).toBeGreaterThan(firstStart);
    expect(await count(db)).toBe(1);

    const events = await getJobEvents(db, first.job.id);
    expect(events.filter((event) => event.kind === 'debounced').map((event) => event.detail)).toMatchObject([
      { key: 'acct-1', enqueues: 1 },
      { key: 'acct-1', enqueues: 2, runAt: second.job.runAt.replace('+00:00', 'Z') },
    ]);
    const steps = await getJobSteps(db, first.job.id);
    expect(steps?.waitingFor).toMatchObject([{ kind: 'debounce', key: 'acct-1', enqueues: 2 }]);
  });

  it('never starts later than the first enqueue plus maxDelay', async () => {
    const { db } = await open('pg');
    const first = await enqueue(db, debounced('a', { debouncePeriodSeconds: 60, debounceMaxDelaySeconds: 90 }));
    // As if the burst began 80 s ago: the period from now would pass its cap.
    await db.query({
      text: `UPDATE skiplock.jobs SET created_at = created_at - interval '80 seconds'`,
      params: [],
    });
    const second = await enqueue(db, debounced('b', { debouncePeriodSeconds: 60, debounceMaxDelaySeconds: 90 }));
    const cap = Date.parse(first.job.createdAt) - 80_000 + 90_000;
    expect(Math.abs(Date.parse(second.job.runAt) - cap)).toBeLessThan(5);
  });

  it('begins a new burst once the job has started; keys are per tenant and queue', async () => {
    const { db } = await open('pg');
    const first = await enqueue(db, debounced('a'));
    await due(db);
    const [claimed] = await claimAll(db);
    expect(claimed?.id).toBe(first.job.id);

    const next = await enqueue(db, debounced('b'));
    expect(next).toMatchObject({ deduplicated: false, debounced: false });
    expect(next.job.id).not.toBe(first.job.id);
    // The running job ending leaves the new burst's key alone.
    await completeMany(db, [claimed!]);
    expect(await enqueue(db, debounced('c'))).toMatchObject({
      debounced: true,
      job: { id: next.job.id, payload: 'c' },
    });

    expect((await enqueue(db, debounced('x', { tenant: 'other' }))).deduplicated).toBe(false);
    expect((await enqueue(db, debounced('y', { queue: 'other' }))).deduplicated).toBe(false);
  });

  it('debounces within one batch, in input order, beside plain jobs', async () => {
    const { db } = await open('pg');
    const results = await enqueueBatch(db, [debounced('a'), { queue: 'plain', payload: 'p' }, debounced('b')]);
    expect(results.map((result) => [result.job.payload, result.deduplicated, result.debounced])).toEqual([
      ['a', false, false],
      ['p', false, false],
      ['b', true, true],
    ]);
    expect(results[2]!.job.id).toBe(results[0]!.job.id);
    expect(await count(db)).toBe(2);
  });

  it('combines with a concurrency key: a held job stays held while debounced', async () => {
    const { db } = await open('pg');
    await enqueue(db, { queue: 'reindex', payload: 'runs', concurrencyKey: 'k' });
    const held = await enqueue(db, debounced('a', { concurrencyKey: 'k' }));
    await enqueue(db, debounced('b', { concurrencyKey: 'k' }));
    const [row] = await db.query<{ state: string; payload: string }>({
      text: `SELECT state, payload #>> '{}' AS payload FROM skiplock.jobs WHERE id = $1`,
      params: [held.job.id],
    });
    expect(row).toEqual({ state: 'held', payload: 'b' });
  });

  it('is counted in the stats while its period runs: held ones too, no longer once due or started', async () => {
    const { db } = await open('pg');
    const debouncedCounts = async () =>
      Object.fromEntries(
        (await queueStats(db))
          .filter((row) => row.queue === 'reindex')
          .map((row) => [row.status, { count: row.count, held: row.held, debounced: row.debounced }]),
      );
    await enqueueBatch(db, [debounced('a'), debounced('b'), debounced('c', { debounceKey: 'acct-2' })]);
    await enqueue(db, { queue: 'reindex', payload: 'x', concurrencyKey: 'k' });
    await enqueue(db, debounced('d', { debounceKey: 'acct-3', concurrencyKey: 'k' }));
    // A plain dedup key's job scheduled for later is not debounced.
    await enqueue(db, { queue: 'reindex', payload: 'later', dedupKey: 'plain', delaySeconds: 60 });
    expect(await debouncedCounts()).toEqual({
      queued: { count: 1, held: 0, debounced: 0 },
      scheduled: { count: 4, held: 1, debounced: 3 },
    });
    // Due (the held one's period still runs), then started.
    await due(db);
    const started = await claimAll(db);
    expect(started.map((job) => job.payload).sort()).toEqual(['b', 'c', 'later', 'x']);
    expect(await debouncedCounts()).toEqual({
      running: { count: 4, held: 0, debounced: 0 },
      scheduled: { count: 1, held: 1, debounced: 1 },
    });
    // The next enqueue of a started key begins a new burst, counted again.
    await enqueue(db, debounced('e'));
    expect((await debouncedCounts()).scheduled).toEqual({ count: 2, held: 1, debounced: 2 });
  });

  it('refuses bad input by name and stores nothing', async () => {
    const { db } = await open('pg');
    const refusals: Array<[Partial<EnqueueInput>, string]> = [
      [{ debouncePeriodSeconds: 0 }, 'debouncePeriodSeconds'],
      [{ debouncePeriodSeconds: 1.5 }, 'debouncePeriodSeconds'],
      [{ debouncePeriodSeconds: undefined }, 'debouncePeriodSeconds'],
      [{ debounceMaxDelaySeconds: 10 }, 'debounceMaxDelaySeconds'],
      [{ debounceKey: 'k'.repeat(257) }, 'debounceKey'],
      [{ orderingKey: 'o' }, 'orderingKey'],
      [{ dedupKey: 'd' }, 'dedupKey'],
      [{ delaySeconds: 5 }, 'debounceKey'],
      [{ debounceKey: undefined }, 'debouncePeriodSeconds'],
    ];
    for (const [change, field] of refusals) {
      const error = await enqueue(db, debounced('x', change)).catch((caught: unknown) => caught);
      expect(error, field).toBeInstanceOf(InvalidInputError);
      expect((error as InvalidInputError).field).toBe(`jobs.0.${field}`);
    }
    expect(await count(db)).toBe(0);
  });

  it('runs one job per burst when many connections enqueue the key at once; the last committed payload wins', async () => {
    const { db, url } = await open('pg');
    const writers: Db[] = Array.from({ length: 12 }, () => pgDb(url, { max: 1 }));
    try {
      const answers = await Promise.all(
        writers.flatMap((writer, w) =>
          Array.from({ length: 5 }, (_, i) =>
            enqueue(writer, debounced(`w${w}-${i}`, { debounceMaxDelaySeconds: 60 })),
          ),
        ),
      );
      const ids = new Set(answers.map((answer) => answer.job.id));
      expect(ids.size).toBe(1);
      expect(answers.filter((answer) => !answer.deduplicated)).toHaveLength(1);
      // The enqueues took turns: each saw the count of those before it.
      const [jobId] = ids;
      const counts = (await getJobEvents(db, jobId!))
        .filter((event) => event.kind === 'debounced')
        .map((event) => (event.detail as { enqueues: number }).enqueues);
      expect(counts).toEqual(Array.from({ length: 60 }, (_, i) => i + 1));
      // One last enqueue after the others answered: its payload is the one that runs.
      await enqueue(db, debounced('last'));
      await due(db);
      const claimed = await claimAll(db);
      expect(claimed.map((job) => job.payload)).toEqual(['last']);
    } finally {
      await Promise.all(writers.map((writer) => writer.close()));
    }
  });

  it('races claims: every enqueue lands in a job that had not started, so no payload is lost', async () => {
    const { db, url } = await open('pg');
    const writers: Db[] = Array.from({ length: 6 }, () => pgDb(url, { max: 1 }));
    const claimer = pgDb(url, { max: 1 });
    const ran = new Map<string, unknown>();
    let writing = true;
    try {
      const claiming = (async () => {
        while (writing) {
          await claimer.query({
            text: `UPDATE skiplock.jobs SET run_at = now(), state = 'queued' WHERE state = 'scheduled'`,
            params: [],
          });
          const claimed = await claimAll(claimer);
          for (const job of claimed) {
            expect(ran.has(job.id)).toBe(false);
            ran.set(job.id, job.payload);
          }
          await completeMany(claimer, claimed);
        }
      })();
      const answers = await Promise.all(
        writers.map(async (writer, w) => {
          const mine = [];
          for (let i = 0; i < 30; i += 1) mine.push(await enqueue(writer, debounced(`w${w}-${i}`)));
          return mine;
        }),
      );
      writing = false;
      await claiming;
      await due(db);
      for (const job of await claimAll(db)) ran.set(job.id, job.payload);
      // Each job answered ran once, with the payload of the last enqueue it took.
      const last = new Map<string, unknown>();
      const jobs = [...new Set(answers.flat().map((answer) => answer.job.id))];
      for (const id of jobs) {
        const events = await getJobEvents(db, id);
        expect(events.filter((event) => event.kind === 'claimed')).toHaveLength(1);
        last.set(id, ran.get(id));
      }
      expect(jobs.every((id) => ran.has(id))).toBe(true);
      const finalPayloads = await db.query<{ id: string; payload: unknown }>({
        text: 'SELECT id, payload FROM skiplock.all_jobs',
        params: [],
      });
      for (const row of finalPayloads) expect(last.get(row.id)).toEqual(row.payload);
    } finally {
      writing = false;
      await Promise.all([...writers, claimer].map((writer) => writer.close()));
    }
  });
});

describe('dedup key conflicts', () => {
  const keyed = (payload: string, extra: Partial<EnqueueInput> = {}): EnqueueInput => ({
    queue: 'sync',
    payload,
    dedupKey: 'acct-1',
    ...extra,
  });

  it('return (the default) gives the existing job back unchanged', async () => {
    const { db } = await open('pg');
    const first = await enqueue(db, keyed('a'));
    const again = await enqueue(db, keyed('b', { dedupOnConflict: 'return' }));
    expect(again).toMatchObject({ deduplicated: true, replaced: false, job: { id: first.job.id, payload: 'a' } });
  });

  it('replace changes the waiting job’s payload, and its run time when given', async () => {
    const { db } = await open('pg');
    const first = await enqueue(db, keyed('a'));
    const kept = await enqueue(db, keyed('b', { dedupOnConflict: 'replace' }));
    expect(kept).toMatchObject({ deduplicated: true, replaced: true, job: { id: first.job.id, payload: 'b' } });
    expect(kept.job.runAt).toBe(first.job.runAt);
    const later = await enqueue(db, keyed('c', { dedupOnConflict: 'replace', delaySeconds: 600 }));
    expect(later.job).toMatchObject({ payload: 'c', status: 'scheduled' });
    expect((await getJobEvents(db, first.job.id)).filter((event) => event.kind === 'replaced')).toHaveLength(2);
  });

  it('replace refuses a job that has started, unless the scope is waiting: then a new job waits', async () => {
    const { db } = await open('pg');
    const first = await enqueue(db, keyed('a'));
    await claimAll(db);
    const error = await enqueue(db, keyed('b', { dedupOnConflict: 'replace' })).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(DedupConflictError);
    expect((error as DedupConflictError).jobId).toBe(first.job.id);
    expect((error as DedupConflictError).message).toMatch(/started, so it cannot be replaced/);

    const waiting = await enqueue(db, keyed('c', { dedupOnConflict: 'replace', dedupScope: 'waiting' }));
    expect(waiting.deduplicated).toBe(false);
    const replaced = await enqueue(db, keyed('d', { dedupOnConflict: 'replace', dedupScope: 'waiting' }));
    expect(replaced).toMatchObject({ replaced: true, job: { id: waiting.job.id, payload: 'd' } });
    expect(await count(db)).toBe(2);
  });

  it('refuse names the job that holds the key and stores nothing', async () => {
    const { db } = await open('pg');
    const first = await enqueue(db, keyed('a'));
    const error = await enqueue(db, keyed('b', { dedupOnConflict: 'refuse' })).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(DedupConflictError);
    expect((error as DedupConflictError).jobId).toBe(first.job.id);
    expect(await count(db)).toBe(1);
    // A free key is taken as by any enqueue.
    expect((await enqueue(db, keyed('c', { dedupKey: 'other', dedupOnConflict: 'refuse' }))).deduplicated).toBe(false);
  });

  it('the waiting scope counts only a job that has not started', async () => {
    const { db } = await open('pg');
    const first = await enqueue(db, keyed('a', { dedupScope: 'waiting' }));
    expect((await enqueue(db, keyed('b', { dedupScope: 'waiting' }))).job.id).toBe(first.job.id);
    await claimAll(db);
    const next = await enqueue(db, keyed('c', { dedupScope: 'waiting' }));
    expect(next.deduplicated).toBe(false);
    // Today's scope still counts the running job... which no longer holds the key: the waiting one does.
    expect((await enqueue(db, keyed('d'))).job.id).toBe(next.job.id);
  });

  it('refuses modes without a dedup key, and a window with the waiting scope', async () => {
    const { db } = await open('pg');
    const refusals: Array<[EnqueueInput, string]> = [
      [{ queue: 'q', dedupOnConflict: 'replace' }, 'dedupOnConflict'],
      [{ queue: 'q', dedupScope: 'waiting' }, 'dedupScope'],
      [{ queue: 'q', dedupKey: 'k', dedupScope: 'waiting', dedupWindowSeconds: 60 }, 'dedupWindowSeconds'],
      [{ queue: 'q', dedupKey: 'k', dedupOnConflict: 'maybe' as 'return' }, 'dedupOnConflict'],
    ];
    for (const [input, field] of refusals) {
      const error = await enqueue(db, input).catch((caught: unknown) => caught);
      expect((error as InvalidInputError).field, field).toBe(`jobs.0.${field}`);
    }
    expect(await count(db)).toBe(0);
  });
});

describe('in SQL', () => {
  it('skiplock.enqueue debounces and refuses by argument name; enqueue_jobs says what each enqueue did', async () => {
    const { db } = await open('pg');
    const sql = (text: string, params: unknown[] = []) => db.query<Record<string, unknown>>({ text, params });
    const debounceSql = `SELECT skiplock.enqueue('reindex', $1::jsonb, debounce_key => 'a', debounce_period_seconds => 30)->>'id' AS id`;
    const [first] = await sql(debounceSql, ['1']);
    const [second] = await sql(debounceSql, ['2']);
    expect(second!.id).toBe(first!.id);
    const [answer] = await sql(
      `SELECT "heldBy", deduplicated, debounced, replaced, "heldJob"->'payload' AS payload FROM skiplock.enqueue_jobs($1)`,
      [JSON.stringify([{ queue: 'reindex', payload: 3, debounceKey: 'a', debouncePeriodSeconds: 30 }])],
    );
    expect(answer).toEqual({ heldBy: first!.id, deduplicated: true, debounced: true, replaced: false, payload: 3 });
    for (const [args, field] of [
      [`debounce_key => 'b', debounce_period_seconds => 0`, 'debounce_period_seconds'],
      [
        `debounce_key => 'b', debounce_period_seconds => 5, debounce_max_delay_seconds => 4`,
        'debounce_max_delay_seconds',
      ],
      [`debounce_key => 'b', debounce_period_seconds => 5, ordering_key => 'o'`, 'debounce_key'],
      [`dedup_on_conflict => 'refuse'`, 'dedup_on_conflict'],
    ]) {
      await expect(sql(`SELECT skiplock.enqueue('q', ${args})`), field).rejects.toThrow(new RegExp(`^${field}: `));
    }
    await sql(`SELECT skiplock.enqueue('q', dedup_key => 'r')`);
    await expect(sql(`SELECT skiplock.enqueue('q', dedup_key => 'r', dedup_on_conflict => 'refuse')`)).rejects.toThrow(
      /^dedup_key: job \S+ holds the key r/,
    );
    expect(await count(db)).toBe(2);
  });
});

describe('definitions', () => {
  const schema = z.object({ accountId: z.string(), n: z.number() });

  it('a definition’s debounce and dedup options key each enqueue', async () => {
    const { db } = await open('pg');
    const reindex = defineJob('reindex', schema, async () => {}, {
      debounce: { key: (p) => `account:${p.accountId}`, periodSeconds: 10, maxDelaySeconds: 60 },
    });
    const first = await enqueue(db, reindex, { accountId: '1', n: 1 });
    const second = await enqueue(db, reindex, { accountId: '1', n: 2 });
    expect(second).toMatchObject({ id: first.id, debounced: true, job: { payload: { accountId: '1', n: 2 } } });

    const sync = defineJob('sync', schema, async () => {}, {
      dedup: { key: (p) => p.accountId, onConflict: 'refuse' },
    });
    await enqueue(db, sync, { accountId: '1', n: 1 });
    await expect(enqueue(db, sync, { accountId: '1', n: 2 })).rejects.toBeInstanceOf(DedupConflictError);
  });

  it('refuses options that cannot hold', () => {
    const make = (options: Parameters<typeof defineJob>[3]) => () => defineJob('x', schema, async () => {}, options);
    expect(make({ debounce: { key: () => 'k', periodSeconds: 0 } })).toThrow(/debounce.periodSeconds/);
    expect(make({ debounce: { key: () => 'k', periodSeconds: 10, maxDelaySeconds: 5 } })).toThrow(
      /debounce.maxDelaySeconds/,
    );
    expect(make({ debounce: { key: () => 'k', periodSeconds: 10 }, ordering: { key: () => 'o' } })).toThrow(
      /cannot combine with ordering/,
    );
    expect(make({ dedup: { key: () => 'k', scope: 'waiting', windowSeconds: 5 } })).toThrow(/dedup.windowSeconds/);
  });
});

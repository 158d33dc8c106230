import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { pgDb } from '../../src/db/pg';
import { clientQueryable } from '../../src/db/pool';
import type { Db } from '../../src/db/types';
import {
  claimBatch,
  complete,
  enqueue,
  enqueueBatch,
  fail,
  reapExpiredLeases,
  release,
  reschedule,
  type ClaimedJob,
} from '../../src/engine';
import { engineDatabases } from '../support/engine-db';

const open = engineDatabases();

/**
 * A session whose claims keep a claim hint after every walk from the front
 * (skiplock.claim_hint_after_ms = 0; by default only after a slow one):
 * its second claim makes a hint, and the claims after it start there.
 */
async function hintingSession(url: string): Promise<Db> {
  const session = pgDb(url, { max: 1 });
  await session.query({ text: 'SET skiplock.claim_hint_after_ms = 0', params: [] });
  return session;
}

async function claimOne(session: Db, worker = 'w'): Promise<ClaimedJob | undefined> {
  const [job] = await claimBatch(session, { max: 1, workerId: worker });
  return job;
}

async function hint(session: Db): Promise<string> {
  const [row] = await session.query<{ hint: string | null }>({
    text: `SELECT current_setting('skiplock.claim_hint', true) AS hint`,
    params: [],
  });
  return row!.hint ?? '';
}

/** Jobs of priority 0, and one of priority 5 (`high`) claimed first: the session then holds a hint past it. */
async function hintedPastHighJob(url: string, db: Db): Promise<{ session: Db; high: ClaimedJob }> {
  const { job } = await enqueue(db, { queue: 'q', type: 't', payload: { n: 'high' }, priority: 5 });
  await enqueueBatch(
    db,
    Array.from({ length: 10 }, (_, n) => ({ queue: 'q', type: 't', payload: { n } })),
  );
  const session = await hintingSession(url);
  const high = await claimOne(session);
  expect(high?.id).toBe(job.id);
  await claimOne(session);
  expect(await hint(session)).not.toBe('');
  return { session, high: high! };
}

describe('the claim hint', () => {
  it('is made, and used, only while no change made a job waiting since', async () => {
    const { db, url } = await open('pg');
    await enqueueBatch(
      db,
      Array.from({ length: 10 }, (_, n) => ({ queue: 'q', type: 't', payload: { n } })),
    );
    const session = await hintingSession(url);
    try {
      await claimOne(session);
      expect(await hint(session)).toBe('');
      await claimOne(session);
      const made = await hint(session);
      expect(made).not.toBe('');
      await claimOne(session);
      // Used: the next one is made from it, good for the same count of changes.
      expect((await hint(session)).split(',')[0]).toBe(made.split(',')[0]);
      await enqueue(db, { queue: 'q', type: 't', payload: { n: 'later' } });
      await claimOne(session);
      // Counted a change since: that claim walked from the front instead, and made a new one.
      expect((await hint(session)).split(',')[0]).not.toBe(made.split(',')[0]);
    } finally {
      await session.close();
    }
  });

  it('never takes a job behind one made waiting ahead of it: enqueued, retried, handed back, reaped, rescheduled, given its turn by its key or updated', async () => {
    const { db, url } = await open('pg');
    const changes: Record<string, (high: ClaimedJob, session: Db) => Promise<string>> = {
      enqueued: async () =>
        (await enqueue(db, { queue: 'q', type: 't', payload: { n: 'urgent' }, priority: 9 })).job.id,
      retried: async (high) => (await fail(db, { ...high, error: { message: 'again' }, retryInSeconds: 0 })).id,
      'handed back': async (high) => (await release(db, high, { delaySeconds: 0 })).id,
      reaped: async (high) => {
        await db.query({
          text: `UPDATE skiplock.jobs SET lease_expires_at = now() - interval '1 second' WHERE id = $1`,
          params: [high.id],
        });
        const [reaped] = await reapExpiredLeases(db);
        await db.query({ text: `UPDATE skiplock.jobs SET run_at = now() WHERE id = $1`, params: [high.id] });
        return reaped!.id;
      },
      rescheduled: async () => {
        const [last] = await db.query<{ id: string }>({
          text: `SELECT id FROM skiplock.jobs WHERE state <> 'running' ORDER BY id DESC LIMIT 1`,
          params: [],
        });
        await reschedule(db, last!.id, { priority: 9 });
        return last!.id;
      },
      // A job held behind its key, given its turn when the key's running job completes.
      'given its turn': async (_high, session) => {
        const keyed = { queue: 'q', type: 't', priority: 9, concurrencyKey: 'k', concurrencyLimit: 1 };
        await enqueue(db, { ...keyed, payload: { n: 'first of its key' } });
        const [running] = await claimBatch(db, { max: 1, workerId: 'other' });
        const { job: held } = await enqueue(db, { ...keyed, payload: { n: 'second of its key' } });
        const [row] = await db.query<{ state: string }>({
          text: 'SELECT state FROM skiplock.jobs WHERE id = $1',
          params: [held.id],
        });
        expect(row?.state).toBe('held');
        // The enqueue counted a change: two claims make the session a hint again.
        await claimOne(session);
        await claimOne(session);
        expect(await hint(session)).not.toBe('');
        await complete(db, { id: running!.id, leaseToken: running!.leaseToken });
        return held.id;
      },
      updated: async () => {
        const [last] = await db.query<{ id: string }>({
          text: `UPDATE skiplock.jobs SET priority = 9
                 WHERE id = (SELECT id FROM skiplock.jobs WHERE state <> 'running' ORDER BY id DESC LIMIT 1) RETURNING id`,
          params: [],
        });
        return last!.id;
      },
    };
    for (const [change, makeWaiting] of Object.entries(changes)) {
      await db.query({ text: 'DELETE FROM skiplock.jobs', params: [] });
      const { session, high } = await hintedPastHighJob(url, db);
      try {
        const ahead = await makeWaiting(high, session);
        expect((await claimOne(session))?.id, change).toBe(ahead);
      } finally {
        await session.close();
      }
    }
  });

  it('is not made while a change that makes a job waiting is in flight, and its job is taken first once committed', async () => {
    const { db, url } = await open('pg');
    await enqueueBatch(
      db,
      Array.from({ length: 10 }, (_, n) => ({ queue: 'q', type: 't', payload: { n } })),
    );
    const session = await hintingSession(url);
    const maker = new pg.Client({ connectionString: url });
    await maker.connect();
    try {
      await claimOne(session);
      await maker.query('BEGIN');
      const { job: urgent } = await enqueue(clientQueryable(maker), {
        queue: 'q',
        type: 't',
        payload: { n: 'urgent' },
        priority: 9,
      });
      // In flight: counted, not committed. The claim cannot see the job, and must not make a hint past it.
      expect((await claimOne(session))?.id).not.toBe(urgent.id);
      expect(await hint(session)).toBe('');
      await maker.query('COMMIT');
      expect((await claimOne(session))?.id).toBe(urgent.id);
    } finally {
      await maker.end();
      await session.close();
    }
  });

  /**
   * Makers enqueue jobs of random priorities, one statement each, while
   * hinting claimers take them. A job committed before a claim was sent,
   * with a higher priority than a job that claim took, must have been taken
   * by a claim sent before that one ended (it may have been locked by one
   * running alongside), never by a later one.
   */
  it('keeps claim order with makers and claimers at once, and takes every job once', async () => {
    const { db, url } = await open('pg');
    const MAKERS = 3;
    const CLAIMERS = 4;
    const JOBS_PER_MAKER = 300;
    const committedAt = new Map<string, { at: number; priority: number }>();
    const claims: Array<{ sentAt: number; endedAt: number; jobs: ClaimedJob[] }> = [];
    let hintsLeft = 0;
    let making = true;

    const makers = Array.from({ length: MAKERS }, async (_, index) => {
      const maker = pgDb(url, { max: 1 });
      try {
        for (let n = 0; n < JOBS_PER_MAKER; n++) {
          const priority = Math.floor(Math.random() * 10);
          const { job } = await enqueue(maker, { queue: 'q', type: 't', payload: { index, n }, priority });
          committedAt.set(job.id, { at: performance.now(), priority });
          if (n % 50 === 49) await new Promise((resolve) => setTimeout(resolve, 20));
        }
      } finally {
        await maker.close();
      }
    });
    const claimers = Array.from({ length: CLAIMERS }, async (_, index) => {
      const session = await hintingSession(url);
      try {
        for (;;) {
          const sentAt = performance.now();
          const jobs = await claimBatch(session, { max: 1 + (index % 3), workerId: `claimer-${index}` });
          claims.push({ sentAt, endedAt: performance.now(), jobs });
          if ((await hint(session)) !== '') hintsLeft += 1;
          if (jobs.length > 0) {
            await db.query({
              text: 'DELETE FROM skiplock.jobs WHERE id = ANY($1::uuid[])',
              params: [jobs.map((job) => job.id)],
            });
          } else if (!making) {
            break;
          }
        }
      } finally {
        await session.close();
      }
    });
    await Promise.all(makers);
    making = false;
    await Promise.all(claimers);

    const claimOf = new Map<string, { sentAt: number; endedAt: number }>();
    const taken: string[] = [];
    for (const claim of claims) {
      for (const job of claim.jobs) {
        taken.push(job.id);
        claimOf.set(job.id, claim);
      }
    }
    expect(taken).toHaveLength(MAKERS * JOBS_PER_MAKER);
    expect(new Set(taken).size).toBe(MAKERS * JOBS_PER_MAKER);
    expect(hintsLeft).toBeGreaterThan(0);

    const passedOver: string[] = [];
    for (const claim of claims) {
      const lowest = Math.min(...claim.jobs.map((job) => job.priority));
      for (const [id, { at, priority }] of committedAt) {
        if (at < claim.sentAt && priority > lowest && claimOf.get(id)!.sentAt > claim.endedAt) passedOver.push(id);
      }
    }
    expect(passedOver).toEqual([]);
  });
});

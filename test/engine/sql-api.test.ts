import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { claimBatch, enqueue, fail, getJob, retry } from '../../src/engine';
import { engineDatabases } from '../support/engine-db';

const open = engineDatabases();

/**
 * The SQL API as an application or an analyst uses it: plain SQL text sent
 * as psql sends it (the simple query protocol, values written into the
 * statement), on a connection of its own.
 */
async function psqlSession(url: string) {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  return {
    client,
    async rows<T = Record<string, unknown>>(text: string): Promise<T[]> {
      return (await client.query(text)).rows as T[];
    },
    async value<T>(text: string): Promise<T> {
      const [row] = (await client.query({ text, rowMode: 'array' })).rows as unknown[][];
      return row![0] as T;
    },
  };
}

type Session = Awaited<ReturnType<typeof psqlSession>>;
type JobJson = Record<string, unknown> & { id: string; status: string };

async function withSession(test: (sql: Session, engine: Awaited<ReturnType<typeof open>>) => Promise<void>) {
  const engine = await open('pg');
  const sql = await psqlSession(engine.url);
  try {
    await test(sql, engine);
  } finally {
    await sql.client.end();
  }
}

const countJobs = (sql: Session) => sql.value<string>('SELECT count(*) FROM skiplock.all_jobs').then(Number);

describe('the SQL API', () => {
  it('a plain INSERT INTO skiplock.jobs enqueues as the engine does: tenant row, wake-up, claimable', async () => {
    await withSession(async (sql, { db }) => {
      await sql.rows('SET application_name TO skiplock_listener');
      await sql.rows('LISTEN skiplock_jobs');
      const woken = new Promise((resolve) => sql.client.once('notification', resolve));
      const [inserted] = await sql.rows<{ id: string }>(
        `INSERT INTO skiplock.jobs (queue, type, tenant, payload) VALUES ('imports', 'imports', 'newco', '{"file": "a.csv"}') RETURNING id`,
      );
      await expect(woken).resolves.toMatchObject({ channel: 'skiplock_jobs' });
      expect(await sql.value('SELECT count(*)::int FROM skiplock.tenants WHERE name = $$newco$$')).toBe(1);
      const claimed = await claimBatch(db, { max: 5, workerId: 'w' });
      expect(claimed.map((job) => [job.id, job.tenant, job.payload])).toEqual([
        [inserted!.id, 'newco', { file: 'a.csv' }],
      ]);
    });
  });

  it('notifies only while a listener (a connection named skiplock_listener) is connected: NOTIFY would serialize the commits', async () => {
    await withSession(async (sql, { url }) => {
      // LISTENing under another name: inserts see no listener and send nothing.
      await sql.rows('LISTEN skiplock_jobs');
      const heard: unknown[] = [];
      sql.client.on('notification', (message) => heard.push(message));
      const other = await psqlSession(url);
      try {
        await other.rows(`INSERT INTO skiplock.jobs (queue, type) VALUES ('imports', 'imports')`);
        // A notification is sent at the insert's commit, before this round trip ends.
        await sql.rows('SELECT 1');
        expect(heard).toEqual([]);
        expect(await other.value<string>(`SELECT current_setting('skiplock.listening')`)).toMatch(/^f /);
      } finally {
        await other.client.end();
      }
    });
  });

  it('a plain INSERT holds its dedup key, and is refused, storing nothing, when another job holds it or it is running', async () => {
    await withSession(async (sql, { db }) => {
      const held = await enqueue(db, { queue: 'q', dedupKey: 'order-1' });
      await expect(
        sql.rows(`INSERT INTO skiplock.jobs (queue, type, dedup_key) VALUES ('q', 'q', 'order-1')`),
      ).rejects.toMatchObject({
        code: '23505',
        column: 'dedup_key',
        message: expect.stringMatching(new RegExp(`^dedup_key: job ${held.job.id} holds the key order-1 in queue q`)),
      });
      await expect(
        sql.rows(`INSERT INTO skiplock.jobs (queue, type, state, lease_token, lease_expires_at)
                  VALUES ('q', 'q', 'running', gen_random_uuid(), now() + interval '1 minute')`),
      ).rejects.toMatchObject({ code: '23514', column: 'state', message: expect.stringMatching(/^state: /) });
      expect(await countJobs(sql)).toBe(1);

      // A free key: the inserted job holds it, and an enqueue with it finds that job.
      const [raw] = await sql.rows<{ id: string }>(
        `INSERT INTO skiplock.jobs (queue, type, dedup_key) VALUES ('q', 'q', 'order-2') RETURNING id`,
      );
      const again = await enqueue(db, { queue: 'q', dedupKey: 'order-2' });
      expect(again).toMatchObject({ deduplicated: true, job: { id: raw!.id } });
    });
  });

  it('a retried keyed job takes its key back when free, and is refused while another job holds it', async () => {
    await withSession(async (sql, { db }) => {
      const failForGood = async () => {
        const [claimed] = await claimBatch(db, { max: 1, workerId: 'w' });
        await fail(db, { ...claimed!, error: 'no', forGood: true });
        return claimed!.id;
      };
      const first = (await enqueue(db, { queue: 'q', dedupKey: 'k' })).job.id;
      await failForGood();
      expect(await retry(db, first)).toMatchObject({ retried: true });
      expect(await enqueue(db, { queue: 'q', dedupKey: 'k' })).toMatchObject({
        deduplicated: true,
        job: { id: first },
      });

      await failForGood();
      const second = (await enqueue(db, { queue: 'q', dedupKey: 'k' })).job.id;
      await expect(retry(db, first)).rejects.toMatchObject({
        code: '23505',
        message: expect.stringContaining(`job ${second} holds the key k`),
      });
      expect((await getJob(db, first))?.status).toBe('failed');
      expect(await countJobs(sql)).toBe(2);
    });
  });

  it('skiplock.enqueue takes named arguments, applies the defaults and dedup, and refuses bad ones by name', async () => {
    await withSession(async (sql) => {
      const job = await sql.value<JobJson>(
        `SELECT skiplock.enqueue('emails', '{"to": "a@example.com"}', tenant => 'acme',
                                 delay => interval '1 hour', dedup_key => 'welcome-a',
                                 failure_callback_url => 'https://hooks.example.com/failed')`,
      );
      expect(job).toMatchObject({
        queue: 'emails',
        type: 'emails',
        tenant: 'acme',
        status: 'scheduled',
        payload: { to: 'a@example.com' },
        maxAttempts: 5,
        leaseSeconds: 60,
        dedupKey: 'welcome-a',
        callbackUrl: null,
        failureCallbackUrl: 'https://hooks.example.com/failed',
      });
      expect(Date.parse(job.runAt as string) - Date.parse(job.createdAt as string)).toBeGreaterThanOrEqual(3_599_000);
      const duplicate = await sql.value<JobJson>(
        `SELECT skiplock.enqueue('emails', tenant => 'acme', dedup_key => 'welcome-a')`,
      );
      expect(duplicate.id).toBe(job.id);

      const refusals: Array<[string, string]> = [
        [`SELECT skiplock.enqueue('emails', delay => interval '-5 minutes')`, 'delay'],
        [`SELECT skiplock.enqueue('emails', delay => interval '5 minutes', run_at => now())`, 'delay'],
        [`SELECT skiplock.enqueue(NULL)`, 'queue'],
        [`SELECT skiplock.enqueue('emails', priority => 5000)`, 'priority'],
        [`SELECT skiplock.enqueue('emails', max_attempts => 0)`, 'max_attempts'],
        [`SELECT skiplock.enqueue('emails', tenant => '')`, 'tenant'],
        [`SELECT skiplock.enqueue('emails', callback_url => 'ftp://files.example.com/x')`, 'callback_url'],
        [`SELECT skiplock.enqueue('emails', failure_callback_url => 'hooks.example.com')`, 'failure_callback_url'],
      ];
      for (const [statement, field] of refusals) {
        await expect(sql.rows(statement), statement).rejects.toMatchObject({
          code: '22023',
          column: field,
          message: expect.stringMatching(new RegExp(`^${field}: `)),
        });
      }
      expect(await countJobs(sql)).toBe(1);
    });
  });

  it('skiplock.enqueue on 20 connections at once with one dedup key makes one job, and every call returns it', async () => {
    await withSession(async (sql, { url }) => {
      const sessions = await Promise.all(Array.from({ length: 20 }, () => psqlSession(url)));
      try {
        const jobs = await Promise.all(
          sessions.map((session) =>
            session.value<JobJson>(`SELECT skiplock.enqueue('orders', dedup_key => 'order-42')`),
          ),
        );
        expect(new Set(jobs.map((job) => job.id)).size).toBe(1);
        expect(await countJobs(sql)).toBe(1);
      } finally {
        await Promise.all(sessions.map((session) => session.client.end()));
      }
    });
  });

  it('a claim from SQL numbers its jobs in claim order: highest priority first, then first enqueued', async () => {
    await withSession(async (sql) => {
      await sql.rows(
        `SELECT skiplock.enqueue('reports', '{"n": 1}'), skiplock.enqueue('reports', '{"n": 2}', priority => 5),
                skiplock.enqueue('reports', '{"n": 3}', priority => 1), skiplock.enqueue('reports', '{"n": 4}')`,
      );
      const claimed = await sql.rows<{ position: number; payload: { n: number } }>(
        `SELECT "position", payload FROM skiplock.claim_batch(4, NULL, NULL, NULL, NULL, 'psql') ORDER BY "position"`,
      );
      expect(claimed).toEqual([
        { position: 1, payload: { n: 2 } },
        { position: 2, payload: { n: 3 } },
        { position: 3, payload: { n: 1 } },
        { position: 4, payload: { n: 4 } },
      ]);
    });
  });

  it('skiplock.complete and skiplock.fail end a claimed job from SQL; a stale token changes nothing', async () => {
    await withSession(async (sql) => {
      await sql.rows(`SELECT skiplock.enqueue('reports', '{"n": 1}'), skiplock.enqueue('reports', '{"n": 2}')`);
      const claimed = await sql.rows<{ id: string; leaseToken: string; payload: { n: number } }>(
        `SELECT id, "leaseToken", payload FROM skiplock.claim_batch(2, NULL, NULL, NULL, NULL, 'psql')`,
      );
      const [first, second] = claimed.sort((a, b) => a.payload.n - b.payload.n);

      const done = await sql.value<JobJson>(
        `SELECT skiplock.complete('${first!.id}', '${first!.leaseToken}', '{"rows": 12}')`,
      );
      expect(done).toMatchObject({ id: first!.id, status: 'succeeded', result: { rows: 12 }, workerId: 'psql' });
      expect(await sql.value(`SELECT skiplock.complete('${first!.id}', '${first!.leaseToken}')`)).toBeNull();

      const failed = await sql.value<JobJson>(
        `SELECT skiplock.fail('${second!.id}', '${second!.leaseToken}', '{"message": "timeout"}', retry_in_seconds => 0)`,
      );
      expect(failed).toMatchObject({ status: 'queued', attempts: 1, lastError: { message: 'timeout' } });
      expect(await sql.value(`SELECT skiplock.fail('${second!.id}', '${second!.leaseToken}', '{}')`)).toBeNull();
      await expect(
        sql.rows(`SELECT skiplock.fail('${second!.id}', '${second!.leaseToken}', '{}', retry_in_seconds => -1)`),
      ).rejects.toMatchObject({ code: '22023', column: 'retry_in_seconds' });

      const [again] = await sql.rows<{ leaseToken: string }>(
        `SELECT "leaseToken" FROM skiplock.claim_batch(1, NULL, NULL, NULL, NULL, 'psql')`,
      );
      const ended = await sql.value<JobJson>(
        `SELECT skiplock.fail('${second!.id}', '${again!.leaseToken}', '{"message": "bad input"}', for_good => true)`,
      );
      expect(ended).toMatchObject({ status: 'failed', attempts: 2, lastError: { message: 'bad input' } });
      const events = await sql.rows<{ kind: string; attempt: number }>(
        `SELECT kind, attempt FROM skiplock.job_events WHERE job_id = '${second!.id}' ORDER BY id`,
      );
      expect(events).toEqual([
        { kind: 'failed', attempt: 1 },
        { kind: 'failed', attempt: 2 },
      ]);
    });
  });

  it('INSERT INTO skiplock.all_jobs enqueues each row and returns it as stored; a running state or a run-time column is refused', async () => {
    await withSession(async (sql, { db }) => {
      const inserted = await sql.rows<{
        id: string;
        state: string;
        tenant: string;
        attempts: number;
        priority: number;
      }>(
        `INSERT INTO skiplock.all_jobs (queue, payload, tenant, priority, callback_url)
         VALUES ('reports', '{"n": 1}', 'acme', 7, 'https://hooks.acme.com/done'), ('reports', '{"n": 2}', 'globex', NULL, NULL)
         RETURNING id, state, tenant, attempts, priority, callback_url`,
      );
      expect(inserted.map(({ id, ...rest }) => [typeof id, rest])).toEqual([
        [
          'string',
          { state: 'queued', tenant: 'acme', attempts: 0, priority: 7, callback_url: 'https://hooks.acme.com/done' },
        ],
        ['string', { state: 'queued', tenant: 'globex', attempts: 0, priority: 0, callback_url: null }],
      ]);
      const refusals: Array<[string, string]> = [
        [`INSERT INTO skiplock.all_jobs (queue, state) VALUES ('reports', 'succeeded')`, 'state'],
        [`INSERT INTO skiplock.all_jobs (queue, state) VALUES ('reports', 'running')`, 'state'],
        [`INSERT INTO skiplock.all_jobs (queue, attempts) VALUES ('reports', 3)`, 'attempts'],
        [`INSERT INTO skiplock.all_jobs (queue, id) VALUES ('reports', gen_random_uuid())`, 'id'],
        [`INSERT INTO skiplock.all_jobs (queue, result) VALUES ('reports', '{}')`, 'result'],
        [`INSERT INTO skiplock.all_jobs (queue, lease_seconds) VALUES ('reports', 0)`, 'lease_seconds'],
        [
          `INSERT INTO skiplock.all_jobs (queue, callback_url) VALUES ('reports', 'mailto:a@example.com')`,
          'callback_url',
        ],
      ];
      for (const [statement, field] of refusals) {
        await expect(sql.rows(statement), statement).rejects.toMatchObject({
          code: '22023',
          message: expect.stringMatching(new RegExp(`^${field}: `)),
        });
      }
      // A refused row takes the statement's other rows with it.
      await expect(
        sql.rows(`INSERT INTO skiplock.all_jobs (queue, state) VALUES ('reports', NULL), ('reports', 'failed')`),
      ).rejects.toMatchObject({ code: '22023' });
      expect(await countJobs(sql)).toBe(2);

      const claimed = await claimBatch(db, { max: 5, workerId: 'w' });
      expect(claimed.map((job) => job.tenant).sort()).toEqual(['acme', 'globex']);
      expect((await getJob(db, inserted[0]!.id))?.status).toBe('running');
    });
  });
});

describe('UPDATE skiplock.all_jobs', () => {
  it("reschedules a waiting job's priority and run_at, recorded in its history; any other change, or a running job, is refused", async () => {
    await withSession(async (sql, { db }) => {
      const { job } = await enqueue(db, {
        queue: 'reports',
        delaySeconds: 3600,
        expiresAt: new Date(Date.now() + 7_200_000),
      });
      const [moved] = await sql.rows<{ priority: number; state: string }>(
        `UPDATE skiplock.all_jobs SET priority = 9, run_at = now() WHERE id = '${job.id}' RETURNING priority, state`,
      );
      expect(moved).toEqual({ priority: 9, state: 'queued' });
      expect(await sql.value(`SELECT kind FROM skiplock.job_events WHERE job_id = '${job.id}'`)).toBe('rescheduled');

      const refusals: Array<[string, string]> = [
        [`UPDATE skiplock.all_jobs SET queue = 'elsewhere' WHERE id = '${job.id}'`, 'queue'],
        [`UPDATE skiplock.all_jobs SET run_at = now() + interval '3 hours' WHERE id = '${job.id}'`, 'run_at'],
        [`UPDATE skiplock.all_jobs SET priority = 2000 WHERE id = '${job.id}'`, 'priority'],
      ];
      const refused = (statement: string, field: string) =>
        expect(sql.rows(statement), statement).rejects.toMatchObject({
          code: '22023',
          message: expect.stringMatching(new RegExp(`^${field}: `)),
        });
      for (const [statement, field] of refusals) await refused(statement, field);

      // A priority alone keeps the start time: a scheduled job stays scheduled.
      const { job: later } = await enqueue(db, { queue: 'reports', delaySeconds: 3600 });
      const [reprioritised] = await sql.rows<{ state: string; run_at: Date }>(
        `UPDATE skiplock.all_jobs SET priority = 4 WHERE id = '${later.id}' RETURNING state, run_at`,
      );
      expect(reprioritised).toEqual({ state: 'scheduled', run_at: new Date(later.runAt) });
      await claimBatch(db, { max: 1, workerId: 'w' });
      await refused(`UPDATE skiplock.all_jobs SET priority = 1 WHERE id = '${job.id}'`, 'state');
      expect(await getJob(db, job.id)).toMatchObject({ status: 'running', priority: 9, queue: 'reports' });
    });
  });
});

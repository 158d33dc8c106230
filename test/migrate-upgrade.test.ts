import { readFile } from 'node:fs/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { pgDb } from '../src/db/pg';
import type { SessionDb } from '../src/db/types';
import { findActiveApiKey } from '../src/engine/api-keys';
import { claimBatch, complete, getJob, getJobEvents, listJobs } from '../src/engine';
import { loadMigrations } from '../src/migrate/load';
import { migrate } from '../src/migrate/runner';
import { dumpSchema, SCHEMA_DUMP_FILE } from '../scripts/schema-dump';
import { createTestDatabase } from './support/database';

/**
 * Every migration as it was released. A released migration is never edited
 * (databases that applied it would refuse the changed file): a schema change
 * is a new numbered file, whose checksum joins this list when it lands.
 */
const RELEASED: Readonly<Record<string, string>> = {
  '0001_schema.sql': 'b91789736df0f80927789f95ae32369a1eb92bc7eccfc75524c55c913e760680',
  '0002_reschedule_keeps_run_at.sql': '524092f20ef2854cdfe471833ab5f52fd87b49d8de3f3179f945b25d5db70446',
  '0003_api_keys_bound_to_a_worker.sql': '933432d29e8fa35196ffbb7b700ba0c876261a2b8ede1f0c46914ed8c4d6ed11',
  '0004_durable_steps.sql': 'b7f2ca047ea870d64d26a52a5178297456f5a0f4899990cb96f9c4287d17cdf0',
  '0005_parked_state.sql': '11d9cb28dccce2cf07bab128bb757f270d4d4c1a971bd042916e6dbfae8d0bca',
  '0006_concurrency_keys.sql': '470b9d6f046ec9de273e5fa1e98dbc3c49410d90693df4d14c30d15e063b0b1c',
  '0007_debounce.sql': '021aff12244d452b4f010601a8aac3efc184621d2d5978108d5ef62e07aedfe4',
  '0008_rate_limited_keys.sql': '2b6afaec2c2cf0e95b31561f685d663507f05c1e52a826882ff67c65066231c2',
  '0009_metrics.sql': '9e5f2a4f8aa6e1618b7dc92c33435036ea1e1b76b929975501670b7d3deeadb5',
  '0010_history_days_under_contention.sql': '31c473e1d74467cb6cf1327286a6f9e8ed4c89dd665ae820906c53b2ed36395c',
  '0011_tags.sql': '736aeb9cda69b284e2afbade7abdf0976ce99758a773df8fc476101d51d28a06',
  '0012_retention.sql': 'c0f51ea58caa2686068940956cf6dcc49b69442929a6fc4734fd7f23674b3530',
  '0013_trace_context.sql': '9f87e7bc31557c4961e42ba42e910305aa646a1cc8fc23816d3bf9192ae79312',
  '0014_requeued_job.sql': '354414ac3caa8a8f8cfdf3ef37ae870522a022aba3dad359d33cb5ce0671b6e8',
  '0015_metrics_totals.sql': '589915dd41503ed15f10ed3cc8d4ac2fbc902be13cfc582c24f5f7d376549fb7',
  '0016_queue_rate_limits.sql': '99ae0d37f567083905743ff6eacab315c6239fdec0fcb9654185bbccdf678aea',
  '0017_trace_links.sql': '58e461750b76e3b79d4aed2abc10ce43d0f6c241fb2783c76408b3fbf35b5703',
  '0018_job_type_retention_by_operators.sql': '5b2ab38a3eda78b3b3dd0da97dd4ae26aa2227231b9364e9a359e98e4c0a2bf2',
  '0019_ended_attempts_by_id.sql': 'a9bc1035ce55838ab950f3ad56b40aca47e7eb99d0abe83e3342a5520c7f0d7a',
  '0020_claim_rechecks_run_at.sql': 'a8f17b27c1a8aaeb72b128b9d8ec531a62410b5be3427733113d7ba01c8dd439',
  '0021_tags.sql': '20edb57710897cc4d3853f2de447410ecbdeee016d92d54a86cec48a4ef57d80',
  '0022_rate_keys_cost_less.sql': '08db447c3d2a73aed4f019607449642d4a1c87ce439423189e08459424a4eb2e',
  '0023_finished_jobs_deleted_in_one_place.sql': 'acea1f940d3377dc64c93a905f9ebcb6330d6cdf972dc65d5b995f812799895a',
  '0024_queue_rate_limits_drop.sql': '0a211d6fdf7c683a0d9e277dcb11a7dc84a56742dd4b19e382ded4e91c2b4920',
  '0025_claims_skip_held_rate_keys.sql': '4bcc67a8ee0af2db34026e9007fce29dd11048f9131b0b0a4796737fe6c6a8aa',
  '0026_held_jobs_count_once.sql': '8672ffbe0505147285762eafbebb4f0bad8d27711cc11f93cc3f7e37b523cb41',
  '0027_rate_keys_released_at_start.sql': 'fa6afe9c88816151c1c12fcc07bbab7e7aa7ab99e0df85d2fe07c013bbf3a3cd',
};

/**
 * A database of the first release, with jobs in every state a job can
 * reach through the SQL API of 0001 (the engine of today may need later
 * migrations, so the fill does not use it).
 */
const fillSql = /* sql */ `
WITH made AS (
  SELECT skiplock.enqueue('upgrade', jsonb_build_object('n', n), tenant => 'acme',
           run_at => CASE WHEN n = 0 THEN now() + interval '1 day' END, max_attempts => 3) AS job
  FROM generate_series(0, 6) n
)
SELECT count(*) FROM made`;

interface Row {
  id: string;
  state: string;
}

describe('upgrading a database of the first release', () => {
  const cleanups: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  it('keeps every released migration exactly as it was released', async () => {
    const checksums = Object.fromEntries((await loadMigrations()).map(({ name, checksum }) => [name, checksum]));
    expect(checksums).toEqual(RELEASED);
  });

  it('applies the later migrations over 0001 full of jobs: the schema of a fresh install, every job readable, the waiting ones claimable', async () => {
    const database = await createTestDatabase({ migrated: false });
    const db: SessionDb = pgDb(database.url, { max: 2 });
    cleanups.push(database.drop, () => db.close());
    const migrations = await loadMigrations();
    await migrate(db, migrations.slice(0, 1));

    // Seven jobs: scheduled, queued, and five claimed, then left running, succeeded, retrying, failed for good, running.
    await db.query({ text: fillSql, params: [] });
    const claimed = await db.query<{ id: string; lease_token: string }>({
      text: `SELECT id, "leaseToken" AS lease_token FROM skiplock.claim_batch(5, 300, NULL, ARRAY['upgrade'], NULL, 'first-release') ORDER BY id`,
      params: [],
    });
    expect(claimed).toHaveLength(5);
    const [, succeeded, retrying, failed] = claimed;
    await db.query({
      text: 'SELECT skiplock.complete($1, $2, $3)',
      params: [succeeded!.id, succeeded!.lease_token, { ok: true }],
    });
    await db.query({
      text: `SELECT skiplock.fail($1, $2, '{"message":"later"}', 3600)`,
      params: [retrying!.id, retrying!.lease_token],
    });
    await db.query({
      text: `SELECT skiplock.fail($1, $2, '{"message":"never"}', for_good => true)`,
      params: [failed!.id, failed!.lease_token],
    });
    await db.query({
      text: `INSERT INTO skiplock.api_keys (name, scopes, secret_sha256, secret_prefix) VALUES ('old', ARRAY['worker'], $1, 'skiplock_old')`,
      params: ['a'.repeat(64)],
    });
    const statesOf = () =>
      db.query<Row>({
        text: `SELECT id, state FROM skiplock.all_jobs WHERE queue = 'upgrade' ORDER BY id`,
        params: [],
      });
    const before = await statesOf();
    const eventsBefore = await Promise.all(before.map(({ id }) => getJobEvents(db, id)));
    expect(before.map((row) => row.state).sort()).toEqual([
      'failed',
      'queued',
      'retrying',
      'running',
      'running',
      'scheduled',
      'succeeded',
    ]);

    const upgrade = await migrate(db, migrations);

    expect(upgrade.applied).toEqual(migrations.slice(1).map((m) => m.name));
    expect(await dumpSchema(db)).toBe(await readFile(SCHEMA_DUMP_FILE, 'utf8'));
    expect(await statesOf()).toEqual(before);
    for (const [index, { id, state }] of before.entries()) {
      expect(await getJob(db, id)).toMatchObject({ id, status: state, payload: { n: expect.any(Number) } });
      expect(await getJobEvents(db, id)).toEqual(eventsBefore[index]);
    }
    expect(await findActiveApiKey(db, 'a'.repeat(64))).toMatchObject({ name: 'old', workerId: null });
    // The running jobs finish with the tokens their claim gave; the queued one is claimed by today's engine.
    for (const { id, lease_token } of [claimed[0]!, claimed[4]!]) {
      expect(await complete(db, { id, leaseToken: lease_token })).toMatchObject({ status: 'succeeded' });
    }
    const [next] = await claimBatch(db, { max: 5, workerId: 'after-upgrade', queues: ['upgrade'] });
    expect(next).toMatchObject({ status: 'running', attempts: 1, payload: { n: expect.any(Number) } });
    expect(await complete(db, next!)).toMatchObject({ status: 'succeeded' });
  });

  it('moves the jobs 0004 parked into their own state: each still wakes by its time, its event or its child', async () => {
    const database = await createTestDatabase({ migrated: false });
    const db: SessionDb = pgDb(database.url, { max: 2 });
    cleanups.push(database.drop, () => db.close());
    const migrations = await loadMigrations();
    const before0005 = migrations.findIndex((m) => m.name.startsWith('0005_'));
    await migrate(db, migrations.slice(0, before0005));

    // Three jobs parked by 0004's statements: a sleep, an event wait, a wait for a child.
    await db.query({
      text: `SELECT skiplock.enqueue('parking', jsonb_build_object('n', n)) FROM generate_series(1, 3) AS n`,
      params: [],
    });
    const [sleeper, waiter, parent] = await db.query<{ id: string; lease_token: string }>({
      text: `SELECT id, "leaseToken" AS lease_token FROM skiplock.claim_batch(3, 300, NULL, ARRAY['parking'], NULL, 'w') ORDER BY id`,
      params: [],
    });
    await db.query({
      text: `SELECT skiplock.sleep_step($1, $2, 'nap', now() + interval '1 hour'),
                    skiplock.wait_for_event($3, $4, 'approval', 'order.approved', 'o-1', now() + interval '1 day', 60),
                    skiplock.invoke_children($5, $6, '[{"name": "child", "child": {"queue": "children"}}]', 60)`,
      params: [sleeper!.id, sleeper!.lease_token, waiter!.id, waiter!.lease_token, parent!.id, parent!.lease_token],
    });
    const statesOf = async () =>
      Object.fromEntries(
        (
          await db.query<{ id: string; state: string }>({
            text: `SELECT id, state FROM skiplock.jobs WHERE queue = 'parking'`,
            params: [],
          })
        ).map(({ id, state }) => [id, state]),
      );
    expect(await statesOf()).toEqual({
      [sleeper!.id]: 'scheduled',
      [waiter!.id]: 'scheduled',
      [parent!.id]: 'scheduled',
    });

    await migrate(db, migrations);

    expect(await statesOf()).toEqual({ [sleeper!.id]: 'parked', [waiter!.id]: 'parked', [parent!.id]: 'parked' });
    for (const { id } of [sleeper!, waiter!, parent!])
      expect(await getJob(db, id)).toMatchObject({ status: 'scheduled' });
    expect(await claimBatch(db, { max: 5, workerId: 'after-upgrade', queues: ['parking'] })).toEqual([]);
    // The event wakes its job; the child's end wakes its parent; the sleep's end wakes the sleeper.
    await db.query({ text: `SELECT skiplock.send_event('order.approved', key => 'o-1')`, params: [] });
    const [child] = await claimBatch(db, { max: 1, workerId: 'after-upgrade', queues: ['children'] });
    await complete(db, child!);
    await db.query({ text: `UPDATE skiplock.jobs SET run_at = now() WHERE id = $1`, params: [sleeper!.id] });
    const woken = await claimBatch(db, { max: 5, workerId: 'after-upgrade', queues: ['parking'] });
    expect(woken.map((job) => job.id).sort()).toEqual([sleeper!.id, waiter!.id, parent!.id].sort());
  });
  it("moves the tags 0011 kept in the live jobs' rows beside them: each job keeps them, listed, claimed and finished", async () => {
    const database = await createTestDatabase({ migrated: false });
    const db: SessionDb = pgDb(database.url, { max: 2 });
    cleanups.push(database.drop, () => db.close());
    const migrations = await loadMigrations();
    await migrate(
      db,
      migrations.slice(
        0,
        migrations.findIndex((m) => m.name.startsWith('0021_')),
      ),
    );
    const [running, waiting, untagged] = await db.query<{ id: string }>({
      text: `SELECT skiplock.enqueue('tagged', tags => v.t)->>'id' AS id
             FROM (VALUES (1, ARRAY['run', 'env=prod']), (2, ARRAY['wait']), (3, NULL)) AS v(n, t) ORDER BY v.n`,
      params: [],
    });
    await db.query({
      text: `SELECT 1 FROM skiplock.claim_batch(1, 300, NULL, ARRAY['tagged'], NULL, 'before-0021')`,
      params: [],
    });

    await migrate(db, migrations);

    expect((await getJob(db, running!.id))?.tags).toEqual(['run', 'env=prod']);
    expect((await getJob(db, waiting!.id))?.tags).toEqual(['wait']);
    expect((await getJob(db, untagged!.id))?.tags).toEqual([]);
    expect((await listJobs(db, { tags: ['env=prod'] })).jobs.map((job) => job.id)).toEqual([running!.id]);
    const [claimed] = await claimBatch(db, { max: 1, workerId: 'after-0021', queues: ['tagged'] });
    expect(claimed!.id).toBe(waiting!.id);
    await complete(db, claimed!);
    expect(await getJob(db, waiting!.id)).toMatchObject({ status: 'succeeded', tags: ['wait'] });
  });
});

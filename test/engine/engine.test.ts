import { describe, expect, it } from 'vitest';
import {
  cancel,
  claimBatch,
  complete,
  completeMany,
  enqueue,
  enqueueBatch,
  extendLease,
  fail,
  getJob,
  getJobEvents,
  InvalidInputError,
  listJobs,
  prepareClaims,
  queueStats,
  release,
  releaseWorker,
  reschedule,
  retry,
  StaleLeaseError,
} from '../../src/engine';
import { DRIVERS } from '../support/drivers';
import { engineDatabases } from '../support/engine-db';

const open = engineDatabases();
const worker = 'test-worker';

describe.each(DRIVERS)('engine over %s', (driver) => {
  it('enqueues a job with defaults and reads it back', async () => {
    const { db } = await open(driver);
    const { job, deduplicated } = await enqueue(db, { queue: 'emails', payload: { to: 'a@example.com' } });
    expect(deduplicated).toBe(false);
    expect(job).toMatchObject({
      queue: 'emails',
      type: 'emails',
      tenant: 'default',
      status: 'queued',
      priority: 0,
      payload: { to: 'a@example.com' },
      attempts: 0,
      maxAttempts: 5,
      startedAt: null,
      finishedAt: null,
    });
    expect(job.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(await getJob(db, job.id)).toEqual(job);
    expect((await getJobEvents(db, job.id)).map((e) => e.kind)).toEqual(['enqueued']);
  });

  it('answers an enqueue with the job exactly as a read gives it, every option set, with or without a dedup key', async () => {
    const { db } = await open(driver);
    const options = {
      queue: 'reports',
      type: 'render',
      tenant: 'acme',
      payload: { pages: [1, 2], title: 'Q3 "final"' },
      priority: 7,
      runAt: '2099-01-02T03:04:05.678Z',
      maxAttempts: 9,
      leaseSeconds: 120,
      expiresAt: '2099-02-01T00:00:00.000Z',
      backoffBaseSeconds: 2,
      backoffMaxSeconds: 60,
      callbackUrl: 'https://example.com/done',
      failureCallbackUrl: 'https://example.com/failed',
    };
    const [plain, keyed] = await enqueueBatch(db, [
      options,
      { ...options, dedupKey: 'report-1', dedupWindowSeconds: 30 },
    ]);
    for (const { job, deduplicated } of [plain!, keyed!]) {
      expect(deduplicated).toBe(false);
      expect(job).toEqual(await getJob(db, job.id));
    }
    expect(keyed!.job).toMatchObject({ status: 'scheduled', dedupKey: 'report-1', runAt: options.runAt, priority: 7 });
    // The dedup hit answers with the job that holds the key, as read.
    const again = await enqueue(db, { ...options, dedupKey: 'report-1' });
    expect(again).toEqual({
      job: await getJob(db, keyed!.job.id),
      deduplicated: true,
      debounced: false,
      replaced: false,
    });
  });

  it('runs the claim, heartbeat, complete cycle and keeps the stats', async () => {
    const { db } = await open(driver);
    const { job } = await enqueue(db, { queue: 'q', type: 'resize', leaseSeconds: 30 });
    const [claimed] = await claimBatch(db, { max: 5, workerId: worker, types: ['resize'] });
    expect(claimed).toMatchObject({ id: job.id, status: 'running', attempts: 1, workerId: worker });
    expect(claimed!.leaseToken).toMatch(/^[0-9a-f-]{36}$/);
    const heartbeat = await extendLease(db, claimed!, { leaseSeconds: 120, progress: { done: 50 } });
    expect(heartbeat.cancelRequested).toBe(false);
    expect(Date.parse(heartbeat.leaseExpiresAt) - Date.now()).toBeGreaterThan(100_000);
    const done = await complete(db, { ...claimed!, result: { width: 640 } });
    expect(done).toMatchObject({ status: 'succeeded', result: { width: 640 }, progress: { done: 50 } });
    expect(done.durationMs).toBeGreaterThanOrEqual(0);
    expect(done.finishedAt).not.toBeNull();
    const kinds = (await getJobEvents(db, job.id)).map((e) => e.kind);
    expect(kinds).toEqual(['enqueued', 'claimed', 'lease_extended', 'completed']);
    const stats = await queueStats(db);
    expect(stats).toEqual([
      {
        queue: 'q',
        tenant: 'default',
        status: 'succeeded',
        count: 1,
        oldestWaitSeconds: null,
        held: 0,
        heldBy: { concurrency: 0, order: 0, failedHead: 0, rate: 0 },
        debounced: 0,
      },
    ]);
  });

  it('refuses a stale lease token everywhere and changes nothing', async () => {
    const { db } = await open(driver);
    await enqueue(db, { queue: 'q' });
    const [first] = await claimBatch(db, { max: 1, workerId: 'a' });
    await release(db, first!);
    const [second] = await claimBatch(db, { max: 1, workerId: 'b' });
    expect(second!.id).toBe(first!.id);
    expect(second!.leaseToken).not.toBe(first!.leaseToken);
    await expect(complete(db, first!)).rejects.toBeInstanceOf(StaleLeaseError);
    await expect(fail(db, { ...first!, error: 'x' })).rejects.toBeInstanceOf(StaleLeaseError);
    await expect(extendLease(db, first!)).rejects.toBeInstanceOf(StaleLeaseError);
    await expect(release(db, first!)).rejects.toBeInstanceOf(StaleLeaseError);
    expect(await getJob(db, first!.id)).toMatchObject({ status: 'running', workerId: 'b' });
    const batch = await completeMany(db, [first!, second!]);
    expect(batch.stale).toEqual([first!.id]);
    expect(batch.completed).toEqual([second!.id]);
    await expect(complete(db, second!)).rejects.toBeInstanceOf(StaleLeaseError);
  });

  it('completes a batch with each job keeping its own result, and none where its handler returned nothing', async () => {
    const { db } = await open(driver);
    await enqueueBatch(db, [{ queue: 'q' }, { queue: 'q' }, { queue: 'q' }, { queue: 'q' }]);
    const claimed = await claimBatch(db, { max: 4, workerId: worker });
    const results = [{ rows: 1 }, undefined, 'two', null];
    const batch = await completeMany(
      db,
      claimed.map((job, index) => ({ ...job, result: results[index] })),
    );
    expect(batch).toEqual({ completed: claimed.map((job) => job.id), stale: [] });
    const stored = await Promise.all(claimed.map(async (job) => (await getJob(db, job.id))?.result));
    expect(stored).toEqual([{ rows: 1 }, null, 'two', null]);
  });

  it('a completion writes the history row skiplock.as_finished defines, column for column', async () => {
    const { db } = await open(driver);
    await enqueue(db, { queue: 'q', payload: { n: 1 }, priority: 3, maxAttempts: 4, dedupKey: 'k' });
    const [job] = await claimBatch(db, { max: 1, workerId: worker });
    // Every column the claim leaves empty given a value, so a column swapped or dropped shows; and
    // started a minute ago, so the handler's start (5 ms after it) is the same whenever it is read.
    await db.query({
      text: `UPDATE skiplock.jobs SET started_at = started_at - interval '1 minute',
               progress = '{"done": 0.5}', last_error = '{"message": "earlier"}',
               cancel_requested_at = now(), callback_url = 'https://example.com/ok',
               failure_callback_url = 'https://example.com/failed', expires_at = now() + interval '1 day', run_ms = 7
             WHERE id = $1`,
      params: [job!.id],
    });
    type Row = Record<string, unknown> & { run_ms: number; finished_at: string };
    const [expected] = await db.query<{ row: Row }>({
      text: `SELECT to_jsonb(skiplock.as_finished(j, 'succeeded', '{"r": 1}', NULL, 5)) AS row FROM skiplock.jobs j WHERE j.id = $1`,
      params: [job!.id],
    });
    await completeMany(db, [{ ...job!, result: { r: 1 }, heldMs: 5 }]);
    const [actual] = await db.query<{ row: Row }>({
      text: 'SELECT to_jsonb(f) AS row FROM skiplock.finished_jobs f WHERE f.id = $1',
      params: [job!.id],
    });
    // Read at different times: the run time and the end can only have grown.
    const { run_ms: expectedRunMs, finished_at: expectedEnd, ...expectedRest } = expected!.row;
    const { run_ms: runMs, finished_at: end, ...rest } = actual!.row;
    expect(rest).toEqual(expectedRest);
    expect(rest).toMatchObject({ state: 'succeeded', result: { r: 1 }, progress: { done: 0.5 }, lease_token: null });
    expect(runMs).toBeGreaterThanOrEqual(expectedRunMs);
    expect(Date.parse(end)).toBeGreaterThanOrEqual(Date.parse(expectedEnd));
  });

  it('claims higher priority first, then FIFO, never before run_at, never an expired job', async () => {
    const { db } = await open(driver);
    const jobs = await enqueueBatch(db, [
      { queue: 'q', payload: 1 },
      { queue: 'q', payload: 2, priority: 5 },
      { queue: 'q', payload: 3 },
      { queue: 'q', payload: 4, delaySeconds: 3600 },
      { queue: 'q', payload: 5, expiresAt: new Date(Date.now() - 1000) },
    ]);
    expect(jobs.map((r) => r.job.status)).toEqual(['queued', 'queued', 'queued', 'scheduled', 'queued']);
    const claimed = await claimBatch(db, { max: 10, workerId: worker });
    expect(claimed.map((j) => j.payload)).toEqual([2, 1, 3]);
  });

  it('prepares a claim without claiming: the waiting job stays as it was, and nothing is left behind', async () => {
    const { db } = await open(driver);
    const { job } = await enqueue(db, { queue: 'q', payload: 1 });
    const counts = {
      text: 'SELECT (SELECT count(*) FROM skiplock.all_jobs)::int AS jobs, (SELECT count(*) FROM skiplock.job_events)::int AS events',
      params: [],
    };
    const countsBefore = await db.query(counts);
    await prepareClaims(db);
    await prepareClaims(db);
    expect(await db.query(counts)).toEqual(countsBefore);
    expect(await getJob(db, job.id)).toEqual(job);
    const claimed = await claimBatch(db, { max: 10, workerId: worker });
    expect(claimed.map((j) => [j.id, j.attempts])).toEqual([[job.id, 1]]);
  });

  it('claims only the requested types and queues', async () => {
    const { db } = await open(driver);
    await enqueueBatch(db, [
      { queue: 'a', type: 'x' },
      { queue: 'a', type: 'y' },
      { queue: 'b', type: 'x' },
    ]);
    const claimed = await claimBatch(db, { max: 10, workerId: worker, types: ['x'], queues: ['a'] });
    expect(claimed.map((j) => [j.queue, j.type])).toEqual([['a', 'x']]);
    expect(await claimBatch(db, { max: 10, workerId: worker, types: [] })).toEqual([]);
  });

  it('deduplicates on queue and dedup key, and honours the dedup window', async () => {
    const { db } = await open(driver);
    const first = await enqueue(db, { queue: 'q', dedupKey: 'order-1' });
    const again = await enqueue(db, { queue: 'q', dedupKey: 'order-1', payload: 'ignored' });
    expect(again).toEqual({ job: { ...first.job }, deduplicated: true, debounced: false, replaced: false });
    const otherQueue = await enqueue(db, { queue: 'other', dedupKey: 'order-1' });
    expect(otherQueue.deduplicated).toBe(false);
    // Keys are per tenant: another tenant's key neither blocks nor matches, in one batch or alone.
    const otherTenants = await enqueueBatch(db, [
      { queue: 'tq', tenant: 'acme', dedupKey: 'order-1' },
      { queue: 'tq', tenant: 'globex', dedupKey: 'order-1' },
    ]);
    expect(otherTenants.map((result) => [result.job.tenant, result.deduplicated])).toEqual([
      ['acme', false],
      ['globex', false],
    ]);
    expect(await enqueue(db, { queue: 'tq', tenant: 'acme', dedupKey: 'order-1' })).toMatchObject({
      deduplicated: true,
      job: { id: otherTenants[0]!.job.id },
    });
    // Finished, no window: the key is free again.
    const [claimed] = await claimBatch(db, { max: 1, workerId: worker, queues: ['q'] });
    await complete(db, claimed!);
    const fresh = await enqueue(db, { queue: 'q', dedupKey: 'order-1' });
    expect(fresh.deduplicated).toBe(false);
    expect(fresh.job.id).not.toBe(first.job.id);
    // Finished inside its window: still deduplicated.
    const windowed = await enqueue(db, { queue: 'w', dedupKey: 'k', dedupWindowSeconds: 3600 });
    const [w] = await claimBatch(db, { max: 1, workerId: worker, queues: ['w'] });
    await complete(db, w!);
    expect(await enqueue(db, { queue: 'w', dedupKey: 'k' })).toMatchObject({
      deduplicated: true,
      job: { id: windowed.job.id, status: 'succeeded' },
    });
  });

  it('rejects a batch with a repeated dedup key or both runAt and delaySeconds, creating nothing', async () => {
    const { db } = await open(driver);
    await expect(
      enqueueBatch(db, [
        { queue: 'q', dedupKey: 'k' },
        { queue: 'q', dedupKey: 'k' },
      ]),
    ).rejects.toThrow(InvalidInputError);
    await expect(enqueue(db, { queue: 'q', runAt: new Date(), delaySeconds: 1 })).rejects.toThrow(/not both/);
    await expect(
      enqueueBatch(
        db,
        Array.from({ length: 1001 }, () => ({ queue: 'q' })),
      ),
    ).rejects.toThrow(/at most 1000/);
    expect((await listJobs(db)).jobs).toEqual([]);
  });

  it('enqueues a batch of 1,000 in one statement, in order', async () => {
    const { db } = await open(driver);
    const results = await enqueueBatch(
      db,
      Array.from({ length: 1000 }, (_, i) => ({ queue: 'bulk', payload: i })),
    );
    expect(results.map((r) => r.job.payload)).toEqual(Array.from({ length: 1000 }, (_, i) => i));
    const claimed = await claimBatch(db, { max: 1000, workerId: worker });
    expect(claimed.map((j) => j.payload)).toEqual(Array.from({ length: 1000 }, (_, i) => i));
    // UUIDv7, in input order; the last 48 bits random, drawn for each job (one seed per batch, never one value).
    const ids = results.map((r) => r.job.id);
    expect(ids.every((id) => /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/.test(id))).toBe(
      true,
    );
    expect([...ids].sort()).toEqual(ids);
    expect(new Set(ids.map((id) => id.slice(-12))).size).toBe(1000);
    const [again] = await enqueueBatch(db, [{ queue: 'bulk' }, { queue: 'bulk' }]);
    expect(ids.map((id) => id.slice(-12))).not.toContain(again!.job.id.slice(-12));
  });

  it('retries with backoff, then fails for good when attempts are spent', async () => {
    const { db } = await open(driver);
    const { job } = await enqueue(db, { queue: 'q', maxAttempts: 2, backoffBaseSeconds: 10, backoffMaxSeconds: 15 });
    const [a1] = await claimBatch(db, { max: 1, workerId: worker });
    const retrying = await fail(db, { ...a1!, error: { message: 'boom' } });
    expect(retrying).toMatchObject({ status: 'retrying', lastError: { message: 'boom' } });
    const delay = (Date.parse(retrying.runAt) - Date.now()) / 1000;
    expect(delay).toBeLessThanOrEqual(10.5);
    expect(delay).toBeGreaterThan(-1);
    // Full jitter may draw a backoff that ends before this claim: then, and only then, the claim takes the job.
    let [a2] = await claimBatch(db, { max: 1, workerId: worker });
    if (a2 === undefined) {
      // A run time of now makes it ready at once.
      await db.query({ text: 'UPDATE skiplock.jobs SET run_at = now() WHERE id = $1', params: [job.id] });
      [a2] = await claimBatch(db, { max: 1, workerId: worker });
    } else {
      expect(Date.now()).toBeGreaterThanOrEqual(Date.parse(retrying.runAt) - 50);
    }
    expect(a2!.attempts).toBe(2);
    const failed = await fail(db, { ...a2!, error: 'again' });
    expect(failed).toMatchObject({ status: 'failed', attempts: 2, lastError: 'again' });
    const kinds = (await getJobEvents(db, job.id)).map((e) => e.kind);
    expect(kinds).toEqual(['enqueued', 'claimed', 'failed', 'claimed', 'failed']);
  });

  it('fails for good on request, and retries after exactly the asked delay', async () => {
    const { db } = await open(driver);
    await enqueueBatch(db, [
      { queue: 'q', payload: 'good' },
      { queue: 'q', payload: 'delay' },
    ]);
    const [a, b] = await claimBatch(db, { max: 2, workerId: worker });
    expect(await fail(db, { ...a!, error: 'bad payload', forGood: true })).toMatchObject({
      status: 'failed',
      attempts: 1,
    });
    const delayed = await fail(db, { ...b!, error: 'later', retryInSeconds: 120 });
    const delay = (Date.parse(delayed.runAt) - Date.parse(delayed.finishedAt ?? new Date().toISOString())) / 1000;
    expect(delayed.status).toBe('retrying');
    expect(delay).toBeGreaterThan(110);
  });

  it('cancels waiting jobs at once and running jobs at their next heartbeat', async () => {
    const { db } = await open(driver);
    const [waiting, running] = await enqueueBatch(db, [{ queue: 'w' }, { queue: 'r' }]);
    expect(await cancel(db, waiting!.job.id)).toMatchObject({ outcome: 'cancelled', job: { status: 'cancelled' } });
    const [claimed] = await claimBatch(db, { max: 1, workerId: worker });
    expect(claimed!.id).toBe(running!.job.id);
    expect(await cancel(db, claimed!.id)).toMatchObject({ outcome: 'cancel_requested', job: { status: 'running' } });
    expect(await extendLease(db, claimed!)).toMatchObject({ cancelRequested: true });
    expect(await fail(db, { ...claimed!, error: 'aborted' })).toMatchObject({ status: 'cancelled' });
    expect(await cancel(db, claimed!.id)).toMatchObject({ outcome: 'already_finished' });
    expect(await cancel(db, '00000000-0000-7000-8000-000000000000')).toBeUndefined();
  });

  it('retries a failed, cancelled or expired job with fresh attempts', async () => {
    const { db } = await open(driver);
    const { job } = await enqueue(db, { queue: 'q', maxAttempts: 1 });
    const [claimed] = await claimBatch(db, { max: 1, workerId: worker });
    await fail(db, { ...claimed!, error: 'x' });
    expect(await retry(db, job.id)).toMatchObject({ retried: true, job: { status: 'queued', attempts: 0 } });
    expect(await retry(db, job.id)).toMatchObject({ retried: false, job: { status: 'queued' } });
    const [again] = await claimBatch(db, { max: 1, workerId: worker });
    expect(await complete(db, again!)).toMatchObject({ status: 'succeeded', attempts: 1 });
  });

  it('reschedules a waiting job: priority and start time, recorded in its history; never a running or finished one', async () => {
    const { db } = await open(driver);
    const [low, high] = await enqueueBatch(db, [{ queue: 'q' }, { queue: 'q', priority: 5 }]);
    const later = await reschedule(db, high!.job.id, { delaySeconds: 3600 });
    expect(later).toMatchObject({ outcome: 'rescheduled', job: { status: 'scheduled', priority: 5 } });
    expect(Date.parse(later!.job.runAt) - Date.now()).toBeGreaterThan(3500_000);
    expect(await reschedule(db, low!.job.id, { priority: 9 })).toMatchObject({
      outcome: 'rescheduled',
      job: { status: 'queued', priority: 9 },
    });
    // The scheduled one back to now: queued again, and the higher priority goes first.
    expect(await reschedule(db, high!.job.id, { runAt: '2001-01-01T00:00:00Z', priority: 10 })).toMatchObject({
      outcome: 'rescheduled',
      job: { status: 'queued', priority: 10 },
    });
    const events = await getJobEvents(db, high!.job.id);
    expect(events.filter((e) => e.kind === 'rescheduled').map((e) => e.detail)).toEqual([
      { from: { priority: 5, runAt: high!.job.runAt }, to: { priority: 5, runAt: later!.job.runAt } },
      { from: { priority: 5, runAt: later!.job.runAt }, to: { priority: 10, runAt: expect.any(String) } },
    ]);
    const [first] = await claimBatch(db, { max: 1, workerId: worker });
    expect(first!.id).toBe(high!.job.id);
    expect(await reschedule(db, first!.id, { priority: 1 })).toMatchObject({
      outcome: 'not_waiting',
      job: { status: 'running', priority: 10 },
    });
    await complete(db, first!);
    expect(await reschedule(db, first!.id, { priority: 1 })).toMatchObject({
      outcome: 'not_waiting',
      job: { status: 'succeeded' },
    });
    expect(await reschedule(db, '00000000-0000-7000-8000-000000000000', { priority: 1 })).toBeUndefined();
    expect(await reschedule(db, low!.job.id, { priority: 1 }, { tenant: 'globex' })).toBeUndefined();
  });

  it('refuses to move a job past its expiry, and keeps a retrying job retrying', async () => {
    const { db } = await open(driver);
    const { job } = await enqueue(db, { queue: 'q', ttlSeconds: 60 });
    expect(await reschedule(db, job.id, { delaySeconds: 120 })).toMatchObject({
      outcome: 'after_expiry',
      job: { status: 'queued', runAt: job.runAt },
    });
    const { job: retried } = await enqueue(db, { queue: 'r' });
    const [claimed] = await claimBatch(db, { max: 1, workerId: worker, queues: ['r'] });
    await fail(db, { ...claimed!, error: 'x', retryInSeconds: 600 });
    expect(await reschedule(db, retried.id, { delaySeconds: 300 })).toMatchObject({
      outcome: 'rescheduled',
      job: { status: 'retrying' },
    });
    expect(await reschedule(db, retried.id, { delaySeconds: 0 })).toMatchObject({
      outcome: 'rescheduled',
      job: { status: 'queued' },
    });
    expect(await claimBatch(db, { max: 1, workerId: worker, queues: ['r'] })).toHaveLength(1);
  });

  it("keeps a job's start time when only its priority changes: a scheduled job stays scheduled, a retrying one keeps its backoff", async () => {
    const { db } = await open(driver);
    const { job: scheduled } = await enqueue(db, { queue: 'later', delaySeconds: 7200 });
    const { job: failing } = await enqueue(db, { queue: 'backoff' });
    const [claimed] = await claimBatch(db, { max: 1, workerId: worker, queues: ['backoff'] });
    const retrying = await fail(db, { ...claimed!, error: 'x', retryInSeconds: 600 });

    const moved = await reschedule(db, scheduled.id, { priority: 3 });
    const stillRetrying = await reschedule(db, failing.id, { priority: 4 });

    expect(moved).toMatchObject({
      outcome: 'rescheduled',
      job: { status: 'scheduled', priority: 3, runAt: scheduled.runAt },
    });
    expect(stillRetrying).toMatchObject({
      outcome: 'rescheduled',
      job: { status: 'retrying', priority: 4, runAt: retrying.runAt },
    });
    expect(await claimBatch(db, { max: 2, workerId: worker, queues: ['later', 'backoff'] })).toEqual([]);
  });

  it("hands back a worker's jobs, a tenant-bound caller's own only", async () => {
    const { db } = await open(driver);
    await enqueueBatch(db, [
      { queue: 'q', tenant: 'acme' },
      { queue: 'q', tenant: 'globex' },
    ]);
    const claimed = await claimBatch(db, { max: 2, workerId: 'crashed' });
    expect(claimed).toHaveLength(2);
    expect((await releaseWorker(db, 'crashed', { tenant: 'acme' })).map((j) => [j.tenant, j.status])).toEqual([
      ['acme', 'queued'],
    ]);
    expect((await releaseWorker(db, 'crashed')).map((j) => [j.tenant, j.status])).toEqual([['globex', 'queued']]);
    expect(await releaseWorker(db, 'crashed')).toEqual([]);
  });

  it('scopes reads and changes to a tenant', async () => {
    const { db } = await open(driver);
    const { job } = await enqueue(db, { queue: 'q', tenant: 'acme' });
    expect(await getJob(db, job.id, { tenant: 'acme' })).toMatchObject({ id: job.id });
    expect(await getJob(db, job.id, { tenant: 'globex' })).toBeUndefined();
    expect(await cancel(db, job.id, { tenant: 'globex' })).toBeUndefined();
    expect(await getJobEvents(db, job.id, { tenant: 'globex' })).toEqual([]);
    expect(await claimBatch(db, { max: 5, workerId: worker, tenant: 'globex' })).toEqual([]);
    expect(await claimBatch(db, { max: 5, workerId: worker, tenant: 'acme' })).toHaveLength(1);
  });

  it('lists newest first with a cursor and filters', async () => {
    const { db } = await open(driver);
    await enqueueBatch(
      db,
      Array.from({ length: 7 }, (_, i) => ({ queue: i % 2 ? 'odd' : 'even', payload: i })),
    );
    const first = await listJobs(db, { limit: 3 });
    expect(first.jobs.map((j) => j.payload)).toEqual([6, 5, 4]);
    const second = await listJobs(db, { limit: 3, cursor: first.nextCursor! });
    expect(second.jobs.map((j) => j.payload)).toEqual([3, 2, 1]);
    const last = await listJobs(db, { limit: 3, cursor: second.nextCursor! });
    expect(last).toEqual({ jobs: [expect.objectContaining({ payload: 0 })], nextCursor: null });
    expect((await listJobs(db, { queue: 'odd' })).jobs.map((j) => j.payload)).toEqual([5, 3, 1]);
    expect((await listJobs(db, { status: 'running' })).jobs).toEqual([]);
    await expect(listJobs(db, { cursor: 'bogus!' })).rejects.toThrow(InvalidInputError);
  });
});

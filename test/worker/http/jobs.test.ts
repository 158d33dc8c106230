import { describe, expect, it } from 'vitest';
import {
  ADMIN_TOKEN,
  claimOne,
  client,
  enqueueJob,
  expectStatus,
  problemOf,
  request,
  success,
  uniqueName,
} from './support/api';
import { serverSentEvents } from './support/sse';
import { waitFor } from '../../support/wait-for';

const api = client();

function getJob(id: string, query = '', headers: Record<string, string> = {}): Promise<Response> {
  return request(`/v1/jobs/${id}${query}`, { apiKey: ADMIN_TOKEN, headers });
}

async function completeJob(id: string, leaseToken: string, result: unknown = { ok: true }) {
  const response = await api.v1.jobs[':id'].complete.$post({ param: { id }, json: { leaseToken, result } });
  expect(response.status).toBe(200);
}

/**
 * Starts `waiter`, a request that waits on the job, with ten more waiting
 * from `etag` beside it: eleven for the job's ten watcher slots, so one is
 * refused at once (429), which shows that the others hold theirs. Holding
 * its slot, the waiter has sent its first read of the job. Should the waiter
 * be the one refused, it tries again once the others ended (after 2 s).
 */
async function waiterHoldingItsSlot(
  id: string,
  etag: string,
  waiter: () => Promise<Response>,
): Promise<{ waiting: Promise<Response>; beside: Promise<Response[]> }> {
  const never = new Promise<never>(() => {});
  return waitFor('the waiting request to hold a watcher slot', async () => {
    const all = [waiter(), ...Array.from({ length: 10 }, () => getJob(id, '?wait=2', { 'if-none-match': etag }))];
    // The index of the first refused; -1 when all ended and none was (one ended before the last came).
    const refused = await Promise.race([
      ...all.map((answer, index) => answer.then((response) => (response.status === 429 ? index : never))),
      Promise.all(all).then(() => -1),
    ]);
    if (refused > 0) return { waiting: all[0]!, beside: Promise.all(all.slice(1)) };
    await Promise.all(all);
    return false;
  });
}

describe('GET /v1/jobs/{id}', () => {
  it('answers the job with an ETag, and 304 to a matching If-None-Match', async () => {
    const { id } = await enqueueJob(uniqueName('get'));

    const response = await getJob(id);
    const etag = response.headers.get('etag')!;
    const again = await getJob(id, '', { 'if-none-match': etag });
    const weakList = await getJob(id, '', { 'if-none-match': `"other", W/${etag}` });

    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({ id, status: 'queued' });
    expect(etag).toMatch(/^"[0-9a-f]{32}"$/);
    expect(again.status).toBe(304);
    expect(again.headers.get('etag')).toBe(etag);
    expect(weakList.status).toBe(304);
  });

  it('answers 404 for an unknown id and 400 for one that is no uuid', async () => {
    const unknown = await getJob(crypto.randomUUID());
    const malformed = await getJob('not-a-uuid');

    expect((await problemOf(unknown)).status).toBe(404);
    expect((await problemOf(malformed)).errors?.[0]?.path).toBe('id');
  });

  it('with ?wait, answers as soon as the job changes', async () => {
    const queue = uniqueName('wait');
    const { id } = await enqueueJob(queue);
    const etag = (await getJob(id)).headers.get('etag')!;

    const { waiting, beside } = await waiterHoldingItsSlot(id, etag, () =>
      getJob(id, '?wait=30', { 'if-none-match': etag }),
    );
    await claimOne(queue);
    const changedAt = Date.now();
    const response = await waiting;

    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({ id, status: 'running' });
    // Within a poll or a few of the change, far from the 30 s the request would wait.
    expect(Date.now() - changedAt).toBeLessThan(15_000);
    await beside;
  });

  it('with ?wait but no If-None-Match, waits for a change from the state it found', async () => {
    const queue = uniqueName('wait-no-etag');
    const { id } = await enqueueJob(queue);

    const etag = (await getJob(id)).headers.get('etag')!;
    // Waiting, it has read the job as it is: queued.
    const { waiting, beside } = await waiterHoldingItsSlot(id, etag, () => getJob(id, '?wait=20'));
    await api.v1.jobs[':id'].cancel.$post({ param: { id } });

    expect(await (await waiting).json()).toMatchObject({ id, status: 'cancelled' });
    await beside;
  });

  it('with ?wait, answers 304 after the wait when nothing changed', async () => {
    const { id } = await enqueueJob(uniqueName('wait-timeout'));
    const etag = (await getJob(id)).headers.get('etag')!;

    const started = Date.now();
    const response = await getJob(id, '?wait=1', { 'if-none-match': etag });

    expect(response.status).toBe(304);
    expect(Date.now() - started).toBeGreaterThanOrEqual(900);
  });

  it('lets 10 requests wait on one job at once, and answers 429 to the next', async () => {
    const { id } = await enqueueJob(uniqueName('wait-cap'));
    const etag = (await getJob(id)).headers.get('etag')!;
    // Eleven at once: whichever arrives last finds the ten slots taken by the others, which wait.
    const waiting = Array.from({ length: 11 }, () => getJob(id, '?wait=2', { 'if-none-match': etag }));
    const plain = await getJob(id);
    const answers = await Promise.all(waiting);

    expect(plain.status).toBe(200);
    expect(answers.map((response) => response.status).sort()).toEqual([...Array(10).fill(304), 429]);
    const refused = answers.find((response) => response.status === 429)!;
    expect(await problemOf(refused)).toMatchObject({ status: 429, type: expect.stringMatching(/too-many-watchers$/) });
    expect(refused.headers.get('retry-after')).toBe('1');
    // The slots are free again.
    expect((await getJob(id, '?wait=1', { 'if-none-match': etag })).status).toBe(304);
  });

  it.each(['31', '-1', 'soon', '1e3'])('refuses ?wait=%s', async (wait) => {
    const { id } = await enqueueJob(uniqueName('wait-invalid'));

    expect((await problemOf(await getJob(id, `?wait=${wait}`))).errors?.[0]?.path).toBe('wait');
  });
});

describe('GET /v1/jobs', () => {
  it('lists a queue newest first, page by page', async () => {
    const queue = uniqueName('list');
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await enqueueJob(queue)).id);

    const first = await success(api.v1.jobs.$get({ query: { queue, limit: '2' } }));
    const second = await success(api.v1.jobs.$get({ query: { queue, limit: '2', cursor: first.nextCursor! } }));
    const third = await success(api.v1.jobs.$get({ query: { queue, limit: '2', cursor: second.nextCursor! } }));

    expect([...first.jobs, ...second.jobs, ...third.jobs].map((job) => job.id)).toEqual(ids.reverse());
    expect(third.nextCursor).toBeNull();
  });

  it('filters by status and type', async () => {
    const queue = uniqueName('list-filter');
    const first = await enqueueJob(queue, { type: 'a' });
    const second = await enqueueJob(queue, { type: 'b' });
    await claimOne(queue);

    const queued = await success(api.v1.jobs.$get({ query: { queue, status: 'queued' } }));
    const running = await success(api.v1.jobs.$get({ query: { queue, status: 'running' } }));
    const ofTypeA = await success(api.v1.jobs.$get({ query: { queue, type: 'a' } }));

    expect(queued.jobs.map((job) => job.id)).toEqual([second.id]);
    expect(running.jobs.map((job) => job.id)).toEqual([first.id]);
    expect(ofTypeA.jobs.map((job) => job.id)).toEqual([first.id]);
  });

  it.each([
    ['?limit=501', 'limit'],
    ['?limit=0', 'limit'],
    ['?status=done', 'status'],
    ['?cursor=bm90LW91cnM', 'cursor'],
    // seq:9999999999999999999, past what a bigint holds: refused before Postgres could say so in its own words.
    [`?cursor=${btoa('seq:9999999999999999999')}`, 'cursor'],
  ])('answers 400 for %s', async (query, path) => {
    const response = await request(`/v1/jobs${query}`, { apiKey: ADMIN_TOKEN });

    const problem = await problemOf(response);
    expect(problem.errors?.[0]?.path).toBe(path);
    expect(problem.detail).not.toMatch(/bigint|range/);
  });

  it('ends a page early once it holds a megabyte of jobs, with a nextCursor for the rest', async () => {
    const queue = uniqueName('list-bytes');
    const ids: string[] = [];
    for (let i = 0; i < 6; i++) ids.push((await enqueueJob(queue, { payload: `${i}`.repeat(250_000) })).id);

    const firstResponse = await api.v1.jobs.$get({ query: { queue, limit: '500' } });
    const firstText = await firstResponse.text();
    const first = JSON.parse(firstText) as { jobs: { id: string }[]; nextCursor: string | null };
    const second = await success(api.v1.jobs.$get({ query: { queue, limit: '500', cursor: first.nextCursor! } }));

    expect(first.jobs).toHaveLength(5);
    expect(first.nextCursor).not.toBeNull();
    // The cap, plus the one job that crosses it.
    expect(new TextEncoder().encode(firstText).length).toBeLessThan(1024 * 1024 + 260_000);
    expect(second.nextCursor).toBeNull();
    expect([...first.jobs, ...second.jobs].map((job) => job.id)).toEqual(ids.reverse());
  });
});

describe('POST /v1/jobs/{id}/cancel and /retry', () => {
  it('cancels a waiting job (200), marks a running one (202), refuses a finished one (409)', async () => {
    const queue = uniqueName('cancel');
    const running = await enqueueJob(queue);
    await claimOne(queue);
    const waiting = await enqueueJob(queue);

    const cancelled = await api.v1.jobs[':id'].cancel.$post({ param: { id: waiting.id } });
    const requested = await api.v1.jobs[':id'].cancel.$post({ param: { id: running.id } });
    const again = await api.v1.jobs[':id'].cancel.$post({ param: { id: waiting.id } });
    const unknown = await api.v1.jobs[':id'].cancel.$post({ param: { id: crypto.randomUUID() } });

    expect(cancelled.status).toBe(200);
    expect(await cancelled.json()).toMatchObject({ status: 'cancelled' });
    expect(requested.status).toBe(202);
    expect(await requested.json()).toMatchObject({ status: 'running', cancelRequested: true });
    expect(await problemOf(again)).toMatchObject({
      status: 409,
      type: 'https://skiplock.dev/problems/already-finished',
    });
    expect(unknown.status).toBe(404);
  });

  it('retries a cancelled job (200) and refuses a waiting one (409)', async () => {
    const queue = uniqueName('retry');
    const job = await enqueueJob(queue);
    const waiting = await enqueueJob(queue);
    await api.v1.jobs[':id'].cancel.$post({ param: { id: job.id } });

    const retried = await api.v1.jobs[':id'].retry.$post({ param: { id: job.id } });
    const refused = await api.v1.jobs[':id'].retry.$post({ param: { id: waiting.id } });
    const unknown = await api.v1.jobs[':id'].retry.$post({ param: { id: crypto.randomUUID() } });

    expect(retried.status).toBe(200);
    expect(await retried.json()).toMatchObject({ id: job.id, status: 'queued', attempts: 0 });
    expect(await problemOf(refused)).toMatchObject({
      status: 409,
      type: 'https://skiplock.dev/problems/not-retryable',
    });
    expect(unknown.status).toBe(404);
  });
});

describe('PATCH /v1/jobs/{id}', () => {
  const patch = (id: string, json: Record<string, unknown>) =>
    request(`/v1/jobs/${id}`, {
      method: 'PATCH',
      apiKey: ADMIN_TOKEN,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(json),
    });

  it('changes the priority and start time of a waiting job, and records it in the history', async () => {
    const queue = uniqueName('reschedule');
    const job = await enqueueJob(queue);

    const later = await api.v1.jobs[':id'].$patch({ param: { id: job.id }, json: { priority: 7, delaySeconds: 3600 } });
    expectStatus(later, 200);
    const moved = await later.json();
    if (!('runAt' in moved)) throw new Error('an admin key gets the whole job back');
    expect(moved).toMatchObject({ id: job.id, status: 'scheduled', priority: 7 });
    expect(Date.parse(moved.runAt) - Date.now()).toBeGreaterThan(3500_000);
    const back = await success(
      api.v1.jobs[':id'].$patch({ param: { id: job.id }, json: { runAt: new Date().toISOString() } }),
    );
    expect(back).toMatchObject({ status: 'queued', priority: 7 });

    const { events } = await success(api.v1.jobs[':id'].history.$get({ param: { id: job.id } }));
    expect(events.filter((event) => event.kind === 'rescheduled')).toHaveLength(2);
  });

  it('refuses a running or finished job (409), an unknown one (404), and bad bodies (400) without changing anything', async () => {
    const queue = uniqueName('reschedule-refused');
    await enqueueJob(queue);
    const running = await claimOne(queue);
    const waiting = await enqueueJob(queue, { ttlSeconds: 60 });

    expect(await problemOf(await patch(running.id, { priority: 1 }))).toMatchObject({
      status: 409,
      type: 'https://skiplock.dev/problems/not-waiting',
    });
    expect(await problemOf(await patch(waiting.id, { delaySeconds: 120 }))).toMatchObject({
      status: 409,
      type: 'https://skiplock.dev/problems/after-expiry',
    });
    expect((await patch(crypto.randomUUID(), { priority: 1 })).status).toBe(404);
    for (const body of [
      {},
      { priority: 5000 },
      { runAt: 'soon' },
      { runAt: '2030-01-01T00:00:00Z', delaySeconds: 1 },
      { state: 'queued' },
    ]) {
      const problem = await problemOf(await patch(waiting.id, body));
      expect(problem.status).toBe(400);
    }
    expect(await success(api.v1.jobs[':id'].$get({ param: { id: waiting.id }, query: {} }))).toMatchObject({
      priority: 0,
      runAt: waiting.runAt,
    });
  });
});

describe('GET /v1/jobs/{id}/events', () => {
  it("streams the job's changes and ends after its final status", async () => {
    const queue = uniqueName('events');
    const { id } = await enqueueJob(queue);
    const response = await request(`/v1/jobs/${id}/events`, { apiKey: ADMIN_TOKEN });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^text\/event-stream/);

    const seen: string[] = [];
    for await (const event of serverSentEvents(response)) {
      seen.push(event.event === 'job' ? JSON.parse(event.data).status : `${event.event}:${event.data}`);
      if (seen.length === 1) {
        const claimed = await claimOne(queue);
        await completeJob(id, claimed.leaseToken);
      }
    }

    expect(seen[0]).toBe('queued');
    expect(seen.slice(-2)).toEqual(['succeeded', 'end:succeeded']);
  });

  it('does not send again the version a reconnecting client has (Last-Event-ID)', async () => {
    const queue = uniqueName('events-resume');
    const { id } = await enqueueJob(queue);
    await api.v1.jobs[':id'].cancel.$post({ param: { id } });
    const etag = (await getJob(id)).headers.get('etag')!;

    const response = await request(`/v1/jobs/${id}/events`, {
      apiKey: ADMIN_TOKEN,
      headers: { 'last-event-id': etag },
    });
    const events = [];
    for await (const event of serverSentEvents(response)) events.push(event);

    expect(events).toEqual([{ event: 'end', data: 'cancelled', id: undefined }]);
  });

  it('answers 404 for an unknown job', async () => {
    expect((await request(`/v1/jobs/${crypto.randomUUID()}/events`, { apiKey: ADMIN_TOKEN })).status).toBe(404);
  });

  it('keeps at most 10 streams of one job open at once, answers 429 to the next, and frees them as they end', async () => {
    const { id } = await enqueueJob(uniqueName('events-cap'));
    const open = await Promise.all(
      Array.from({ length: 10 }, () => request(`/v1/jobs/${id}/events`, { apiKey: ADMIN_TOKEN })),
    );

    const eleventh = await request(`/v1/jobs/${id}/events`, { apiKey: ADMIN_TOKEN });
    expect(open.map((response) => response.status)).toEqual(Array(10).fill(200));
    expect(await problemOf(eleventh)).toMatchObject({ status: 429, type: expect.stringMatching(/too-many-watchers$/) });

    // Streams that end (the job did) give their slots back.
    await api.v1.jobs[':id'].cancel.$post({ param: { id } });
    const lastEvents = await Promise.all(
      open.map(async (response) => {
        let last = '';
        for await (const event of serverSentEvents(response)) last = event.event;
        return last;
      }),
    );
    expect(lastEvents).toEqual(Array(10).fill('end'));
    const again = await request(`/v1/jobs/${id}/events`, { apiKey: ADMIN_TOKEN });
    expect(again.status).toBe(200);
    await again.body!.cancel();
  });
});

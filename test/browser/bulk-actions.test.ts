import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseResponse } from 'hono/client';
import { pgDb } from '../../src/db/pg';
import type { Db } from '../../src/db/types';
import { failedJobs } from '../support/attempts';
import { runBrowserTests } from './support/chromium';
import { createKey, enqueueManual, MANUAL_TYPE } from './support/jobs';
import { ADMIN_TOKEN } from './support/stack';
import { signIn, useStackAndBrowser, waitForShown } from './support/suite';

/**
 * The job list's bulk action, in Chromium against the real stack: the
 * filter, the dry run's count in the question, and then the tables, read
 * straight from the database, changed in exactly the jobs counted.
 */
describe.runIf(runBrowserTests)('bulk actions on the dashboard', () => {
  const { stack, newPage } = useStackAndBrowser();
  let db: Db;

  beforeAll(() => {
    db = pgDb(stack().databaseUrl, { max: 2 });
  });
  afterAll(async () => {
    await db?.close();
  });

  /** Jobs of a type no drain of the stack runs, failed for good; their ids. */
  function deadJobs(count: number, queue: string, tenant: string): Promise<string[]> {
    return failedJobs(db, count, { queue, tenant, type: MANUAL_TYPE });
  }

  /** Every job's queue and status, from the tables: a live job's status as the API lists it. */
  async function jobStates(): Promise<Map<string, string>> {
    const rows = await db.query<{ id: string; state: string }>({
      text: `SELECT id::text, queue || ' ' || skiplock.job_status(state, run_at) AS state FROM skiplock.jobs
             UNION ALL SELECT id::text, queue || ' ' || state FROM skiplock.finished_jobs`,
      params: [],
    });
    return new Map(rows.map((row) => [row.id, row.state]));
  }

  /** The jobs whose queue or status differs from `before` (a deleted job is "gone"). */
  async function changedSince(before: Map<string, string>): Promise<Record<string, string>> {
    const after = await jobStates();
    const changed: Record<string, string> = {};
    for (const [id, state] of before) if (after.get(id) !== state) changed[id] = after.get(id) ?? 'gone';
    for (const [id, state] of after) if (!before.has(id)) changed[id] = `new ${state}`;
    return changed;
  }

  async function signInTo(page: Page, key: string): Promise<void> {
    await signIn(page, stack().url, key);
    await waitForShown(page, '#overview-view');
  }

  /** Filters the job list as a person does, and waits for the list (and the action) to show that filter. */
  async function filterJobs(
    page: Page,
    fields: { queue?: string; tenant?: string; type?: string; status?: string; payload?: string },
    rows: number,
  ) {
    await page.click('nav >> text=Jobs');
    // Once the unfiltered list is in, so its loading does not fill the filter's fields after this does.
    await page.locator('#bulk-scope:text-is("no filter, every job")').waitFor();
    for (const name of ['queue', 'tenant', 'type', 'payload'] as const)
      await page.fill(`#filter-${name}`, fields[name] ?? '');
    await page.selectOption('#filter-status', fields.status ?? '');
    await page.click('#job-filters button[type="submit"]');
    // The list's rows and the action's filter change together, once the jobs of this filter have come.
    const scope = Object.entries(fields).map(
      ([name, value]) => `${name === 'payload' ? 'payload contains' : name} ${value}`,
    );
    await expect.poll(() => page.locator('#bulk-scope').textContent()).toBe(scope.join(', '));
    expect(await page.locator('#jobs-table tbody tr').count()).toBe(rows);
  }

  async function noticeText(page: Page): Promise<string> {
    await page.locator('#notice').waitFor();
    return (await page.locator('#notice').textContent()) ?? '';
  }

  /** Presses the action's button and answers the question the dialog asks. */
  async function countAndAsk(page: Page): Promise<{ title: string; text: string }> {
    await page.click('#bulk-count');
    await page.locator('#confirm-dialog').waitFor();
    return {
      title: (await page.locator('#confirm-title').textContent()) ?? '',
      text: (await page.locator('#confirm-text').textContent()) ?? '',
    };
  }

  it('retries the failed jobs the filter shows, asking with their count; keeping them as is changes nothing', async () => {
    const counted = await deadJobs(3, 'bulk-retry', 'acme');
    await deadJobs(2, 'bulk-retry', 'globex');
    await deadJobs(2, 'bulk-elsewhere', 'acme');
    await enqueueManual(stack().api, 'bulk-retry', { tenant: 'acme' });
    const before = await jobStates();
    const page = await newPage();
    await signInTo(page, ADMIN_TOKEN);
    await filterJobs(page, { queue: 'bulk-retry', tenant: 'acme', status: 'failed' }, 3);

    expect(await countAndAsk(page)).toEqual({
      title: '3 jobs match; retry them?',
      text:
        'Filter: queue bulk-retry, tenant acme, status failed. Matching now: 3 failed. ' +
        'Failed, cancelled and expired jobs among them are queued again with fresh attempts.',
    });
    await page.click('#confirm-dialog button[value="cancel"]');
    expect(await page.locator('#confirm-dialog').isVisible()).toBe(false);
    expect(await changedSince(before)).toEqual({});

    const asked = await countAndAsk(page);
    expect(asked.title).toBe('3 jobs match; retry them?');
    expect(await page.locator('#confirm-ok').textContent()).toBe('Retry 3 jobs');
    await page.click('#confirm-ok');
    expect(await noticeText(page)).toBe('Retried 3 jobs.');
    expect(await changedSince(before)).toEqual(Object.fromEntries(counted.map((id) => [id, 'bulk-retry queued'])));
    // The list refreshes: its filter (failed) shows none of them now.
    await expect.poll(() => page.locator('#jobs-table tbody tr').count()).toBe(0);
  });

  it('reschedules the waiting jobs the filter shows by the delay given', async () => {
    const later = [];
    for (const tenant of ['acme', 'globex'])
      later.push((await enqueueManual(stack().api, 'bulk-later', { tenant })).id);
    await enqueueManual(stack().api, 'bulk-now', { tenant: 'acme' });
    const before = await jobStates();
    const page = await newPage();
    await signInTo(page, ADMIN_TOKEN);
    await filterJobs(page, { queue: 'bulk-later' }, 2);
    await page.selectOption('#bulk-action', 'reschedule');
    await page.fill('#bulk-delay', '600');
    const asked = await countAndAsk(page);
    expect(asked.title).toBe('2 jobs match; reschedule them?');
    expect(asked.text).toMatch(/Matching now: 2 queued\. .* Delay: 600 s\.$/);
    await page.click('#confirm-ok');
    expect(await noticeText(page)).toBe('Rescheduled 2 jobs.');
    expect(await changedSince(before)).toEqual(Object.fromEntries(later.map((id) => [id, 'bulk-later scheduled'])));
  });

  it('cancels the jobs of a type and payload match, the filter the list shows', async () => {
    const { api } = stack();
    const match = await enqueueManual(api, 'bulk-payload', { tenant: 'acme', payload: { customer: 42, plan: 'pro' } });
    await enqueueManual(api, 'bulk-payload', { tenant: 'acme', payload: { customer: 7, plan: 'pro' } });
    const before = await jobStates();
    const page = await newPage();
    await signInTo(page, ADMIN_TOKEN);
    await filterJobs(page, { queue: 'bulk-payload', type: MANUAL_TYPE, payload: '{"customer":42}' }, 1);
    await page.locator(`tr[data-job="${match.id}"]`).waitFor();
    await page.selectOption('#bulk-action', 'cancel');
    expect((await countAndAsk(page)).title).toBe('1 job matches; cancel it?');
    await page.click('#confirm-ok');
    expect(await noticeText(page)).toBe('Cancelled 1 job.');
    expect(await changedSince(before)).toEqual({ [match.id]: 'bulk-payload cancelled' });
  });

  it('says 0 for a filter that matches nothing, and asks nothing', async () => {
    await deadJobs(1, 'bulk-zero', 'acme');
    const before = await jobStates();
    const page = await newPage();
    await signInTo(page, ADMIN_TOKEN);
    await filterJobs(page, { queue: 'bulk-zero', status: 'succeeded' }, 0);
    await page.selectOption('#bulk-action', 'delete');
    await page.click('#bulk-count');
    expect(await noticeText(page)).toBe('0 jobs match: nothing to delete.');
    expect(await page.locator('#confirm-dialog').isVisible()).toBe(false);
    expect(await changedSince(before)).toEqual({});
  });

  it('without a filter, acts only once "every job" is ticked, and then counts every job', async () => {
    await deadJobs(1, 'bulk-every', 'acme');
    await enqueueManual(stack().api, 'bulk-every', { tenant: 'acme' });
    const before = await jobStates();
    const page = await newPage();
    await signInTo(page, ADMIN_TOKEN);
    await page.click('nav >> text=Jobs');
    await page.locator('#bulk-scope:text-is("no filter, every job")').waitFor();
    await page.selectOption('#bulk-action', 'cancel');
    await page.click('#bulk-count');
    expect(await noticeText(page)).toBe(
      'No filter is set: filter the jobs first, or tick "Every job" to act on all of them.',
    );
    expect(await page.locator('#confirm-dialog').isVisible()).toBe(false);

    await page.check('#bulk-all');
    const { matched } = await parseResponse(
      stack().api.v1.jobs.bulk.$post({ json: { action: 'cancel', all: true, dryRun: true } }),
    );
    const live = [...before.values()].filter((state) => !/ (succeeded|failed|cancelled|expired)$/.test(state));
    expect(matched).toBe(live.length);
    expect((await countAndAsk(page)).title).toBe(`${matched} jobs match; cancel them?`);
    await page.keyboard.press('Escape');
    expect(await changedSince(before)).toEqual({});
  });

  it("acts for a tenant-bound key on its own tenant's jobs only, and offers no other tenant", async () => {
    const theirs = await deadJobs(2, 'bulk-tenants', 'acme');
    const own = await deadJobs(2, 'bulk-tenants', 'globex');
    const before = await jobStates();
    const page = await newPage();
    await signInTo(page, await createKey(stack().api, ['read', 'operator'], 'globex'));
    await page.locator('tr[data-tenant="globex"]').waitFor();
    expect(
      await page.locator('#tenant-names option').evaluateAll((options) => options.map((o) => o.getAttribute('value'))),
    ).toEqual(['globex']);

    await filterJobs(page, { queue: 'bulk-tenants' }, 2);
    await page.selectOption('#bulk-action', 'delete');
    expect((await countAndAsk(page)).title).toBe('2 jobs match; delete them?');
    await page.click('#confirm-ok');
    expect(await noticeText(page)).toBe('Deleted 2 jobs.');
    expect(await changedSince(before)).toEqual(Object.fromEntries(own.map((id) => [id, 'gone'])));

    // Another tenant named in the filter: the list shows none of its jobs, and the action takes none.
    await filterJobs(page, { queue: 'bulk-tenants', tenant: 'acme' }, 0);
    await page.click('#bulk-count');
    expect(await noticeText(page)).toBe('0 jobs match: nothing to delete.');
    expect(Object.keys(await changedSince(before)).filter((id) => theirs.includes(id))).toEqual([]);
  });

  it('refuses a key without the operator scope at the count, and changes nothing', async () => {
    await deadJobs(2, 'bulk-refused', 'acme');
    const before = await jobStates();
    const page = await newPage();
    await signInTo(page, await createKey(stack().api, ['read', 'enqueue']));
    await filterJobs(page, { queue: 'bulk-refused' }, 2);
    await page.click('#bulk-count');
    expect(await noticeText(page)).toMatch(/^Refused\. Forbidden: this key lacks the operator\b/);
    expect(await page.locator('#confirm-dialog').isVisible()).toBe(false);
    expect(await changedSince(before)).toEqual({});
  });
  it('redrives dead jobs into another queue over several requests, following the cursor to the count confirmed', {
    timeout: 180_000,
  }, async () => {
    // More than one request's batches (20 of 500), so the page must carry on with nextCursor. Last: while
    // its 10,200 failed attempts are in the last hour, GET /v1/stats/timings takes 30 s and more for a
    // tenant-bound key (of another tenant), which the overview of the tenant-bound test waits for.
    const counted = await deadJobs(10_200, 'bulk-many', 'acme');
    const before = await jobStates();
    const page = await newPage();
    await signInTo(page, ADMIN_TOKEN);
    await filterJobs(page, { queue: 'bulk-many' }, 25);
    const requests: string[] = [];
    page.on('request', (request) => {
      if (request.url().endsWith('/v1/jobs/bulk')) requests.push(request.postData() ?? '');
    });
    await page.selectOption('#bulk-action', 'redrive');
    await page.fill('#bulk-to-queue', 'bulk-replay');
    const asked = await countAndAsk(page);
    expect(asked.title).toBe('10200 jobs match; redrive them?');
    expect(asked.text).toContain('They move into queue bulk-replay.');
    await page.click('#confirm-ok');
    await page.locator('#notice:text-is("Redriven 10200 jobs.")').waitFor({ timeout: 150_000 });

    expect(await changedSince(before)).toEqual(Object.fromEntries(counted.map((id) => [id, 'bulk-replay queued'])));
    const sent = requests.map((body) => JSON.parse(body) as { dryRun?: boolean; limit?: number; cursor?: string });
    expect(sent.map(({ dryRun, limit, cursor }) => ({ dryRun, limit, cursor: cursor !== undefined }))).toEqual([
      { dryRun: true, limit: undefined, cursor: false },
      { dryRun: undefined, limit: 10_200, cursor: false },
      { dryRun: undefined, limit: 200, cursor: true },
    ]);
  });
});

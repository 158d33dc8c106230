import type { Page } from 'playwright-core';
import { beforeAll, describe, expect, it } from 'vitest';
import { parseResponse } from 'hono/client';
import { pgDb } from '../../src/db/pg';
import { drainOnce } from '../../src/drain/drain-once';
import { demoWorkflowJob } from '../../src/drain/handlers/demo';
import { createRegistry } from '../../src/drain/registry';
import { JOB_STATUSES, setQueue as setQueueSettings, type DeliveryTarget } from '../../src/engine';
import { PHONE, runBrowserTests } from './support/chromium';
import {
  attemptTimings,
  claimNext,
  completeJob,
  createKey,
  dailyAttemptStats,
  enqueueManual,
  failForGood,
  getJob,
  getTenant,
  queueSummaries,
  setQueue,
} from './support/jobs';
import { ADMIN_TOKEN } from './support/stack';
import { signIn, useStackAndBrowser, waitForShown } from './support/suite';

describe.runIf(runBrowserTests)('dashboard in Chromium', () => {
  const { stack, newPage } = useStackAndBrowser();

  /** A job that ran once and failed for good. */
  async function failedJob(queue: string, tenant: string): Promise<string> {
    await enqueueManual(stack().api, queue, { tenant, payload: { report: 'monthly' } });
    const claimed = await claimNext(stack().api, queue);
    await failForGood(stack().api, claimed.id, claimed.leaseToken, { message: 'the printer is on fire' });
    return claimed.id;
  }

  async function confirm(page: Page): Promise<void> {
    await page.locator('#confirm-dialog').waitFor();
    await page.click('#confirm-ok');
  }

  async function noticeText(page: Page): Promise<string> {
    const notice = page.locator('#notice');
    await notice.waitFor();
    return (await notice.textContent()) ?? '';
  }

  beforeAll(async () => {
    const { api } = stack();
    for (const to of ['ada@example.com', 'grace@example.com', 'alan@example.com']) {
      await enqueueManual(api, 'emails', { tenant: 'acme', payload: { to } });
    }
    await claimNext(api, 'emails');
    await enqueueManual(api, 'reports', { tenant: 'globex' });
    await failedJob('reports-failing', 'globex');
    await setQueue(api, 'reports', { concurrency: 40, weight: 2 });
  });

  /**
   * Sets a queue's delivery target straight in the database (this stack
   * allows no webhook host, so the API would refuse it), or clears it.
   */
  async function setDelivery(queue: string, delivery: DeliveryTarget | null): Promise<void> {
    const db = pgDb(stack().databaseUrl, { max: 1 });
    try {
      await setQueueSettings(db, queue, { concurrency: null, weight: 1, delivery });
    } finally {
      await db.close();
    }
  }

  it('refuses an unknown key, then signs in and shows each queue as the API counts it', async () => {
    // Its only job failed for good: no drain tries the target. Cleared below, since later tests claim from the queue.
    await setDelivery('reports-failing', {
      target: 'webhook',
      url: 'https://hooks.example.com/skiplock',
      batchSize: 50,
    });
    const page = await newPage();
    await signIn(page, stack().url, 'not-a-key');
    await page.locator('#sign-in-error').waitFor();
    expect(await page.locator('#sign-in-error').textContent()).toBe('Unauthorized: the API key is unknown or revoked');

    await signIn(page, stack().url, ADMIN_TOKEN);
    await page.locator('tr[data-queue="emails"]').waitFor();
    const { queues } = await queueSummaries(stack().api);
    expect(queues.map((queue) => queue.queue)).toEqual(['emails', 'reports', 'reports-failing']);
    for (const queue of queues) {
      const row = page.locator(`tr[data-queue="${queue.queue}"]`);
      for (const status of JOB_STATUSES) {
        expect(await row.locator(`td[data-count="${status}"]`).textContent(), `${queue.queue} ${status}`).toBe(
          String(queue.counts[status]),
        );
      }
      const settings = [
        queue.concurrency === null ? '' : `cap ${queue.concurrency}`,
        queue.weight === 1 ? '' : `weight ${queue.weight}`,
        queue.delivery === null ? '' : 'to webhook hooks.example.com',
      ];
      const said = settings.filter(Boolean).join(', ');
      if (said === '') expect(await row.locator('[data-settings]').count()).toBe(0);
      else expect(await row.locator('[data-settings]').textContent()).toBe(said);
    }
    expect(queues.find((queue) => queue.queue === 'reports')).toMatchObject({ concurrency: 40, weight: 2 });
    expect(queues.find((queue) => queue.queue === 'reports-failing')?.delivery).toMatchObject({ target: 'webhook' });
    await setDelivery('reports-failing', null);
    expect(await page.locator('#total-running').textContent()).toBe('1');
    expect(await page.locator('#running-table tbody tr').count()).toBe(1);
    expect(await page.locator('#throughput-chart svg').getAttribute('aria-label')).toContain('1 failed');
    // The health panel: jobs wait (so an age shows), no worker vanished (no reaped lease).
    expect(await page.locator('#health-oldest-waiting').textContent()).toMatch(/^\d+ s$/);
    expect(await page.locator('#health-reaped').textContent()).toBe('0');
    expect(await page.locator('#health-dead-tuples').textContent()).toMatch(/^\d+$/);
  });

  it('opens a failed job: payload, last error, attempts and history', async () => {
    const id = await failedJob('reports-failing', 'globex');
    const page = await newPage();
    await signIn(page, stack().url, ADMIN_TOKEN);
    await page.click('nav >> text=Jobs');
    await page.fill('#filter-queue', 'reports-failing');
    await page.selectOption('#filter-status', 'failed');
    await page.click('#job-filters button[type="submit"]');
    await page.click(`tr[data-job="${id}"] a`);

    await page.locator('#job-view').waitFor();
    expect(await page.locator('#job-id').textContent()).toBe(id);
    expect(await page.locator('#job-status').textContent()).toBe('Failed');
    expect(JSON.parse((await page.locator('#job-payload').textContent())!)).toEqual({ report: 'monthly' });
    expect(await page.locator('#job-error').textContent()).toContain('the printer is on fire');
    expect(await page.locator('#job-details').textContent()).toContain('1 of 5');
    const history = await page.locator('#job-history li .event-kind').allTextContents();
    expect(history).toEqual(['Enqueued', 'Claimed', 'Attempt failed']);
  });

  it("filters the job list by tag, shows each job's tags, and will not send a tag of a bad syntax", async () => {
    const { api } = stack();
    const spring = await enqueueManual(api, 'tagged', { tenant: 'acme', tags: ['campaign:spring', 'env=prod'] });
    await enqueueManual(api, 'tagged', { tenant: 'acme', tags: ['env=test'] });
    const page = await newPage();
    await signIn(page, stack().url, ADMIN_TOKEN);
    await page.click('nav >> text=Jobs');
    await page.fill('#filter-tag', 'env=prod');
    await page.click('#job-filters button[type="submit"]');
    await page.waitForURL(/tag=env%3Dprod/);
    await expect.poll(() => page.locator('#jobs-table tbody tr').count()).toBe(1);
    await page.locator(`tr[data-job="${spring.id}"]`).waitFor();
    expect(await page.locator(`tr[data-job="${spring.id}"] .tag`).allTextContents()).toEqual([
      'campaign:spring',
      'env=prod',
    ]);

    await page.fill('#filter-tag', 'not a tag');
    expect(
      await page.locator('#filter-tag').evaluate((input) => (input as { checkValidity(): boolean }).checkValidity()),
    ).toBe(false);
    await page.click('#job-filters button[type="submit"]');
    expect(page.url()).toMatch(/tag=env%3Dprod/);
  });

  it('retries a failed job once confirmed, and shows it queued again', async () => {
    const id = await failedJob('reports-failing', 'globex');
    const page = await newPage();
    await signIn(page, stack().url, ADMIN_TOKEN);
    await page.goto(`${stack().url}/#/jobs/${id}`);
    await page.locator('#job-status:text("Failed")').waitFor();

    // Keeping it as is changes nothing.
    await page.click('#job-retry');
    await page.click('#confirm-dialog button[value="cancel"]');
    expect((await getJob(stack().api, id)).status).toBe('failed');

    await page.click('#job-retry');
    await confirm(page);
    expect(await noticeText(page)).toBe('The job is queued again.');
    await page.locator('#job-status:text("Queued")').waitFor();
    expect((await getJob(stack().api, id)).status).toBe('queued');
    expect(await page.locator('#job-history li .event-kind').last().textContent()).toBe('Retried');
  });

  it("shows a parked job's steps and what it waits for", async () => {
    // A type of its own, run by this test's drain only (the stack's drains do not know it).
    const workflow = { ...demoWorkflowJob, type: 'browser-workflow' };
    const { id } = await parseResponse(
      stack().api.v1.queues[':queue'].jobs.$post({
        param: { queue: 'workflows' },
        json: { type: workflow.type, payload: { key: 'order-7' } },
        header: {},
      }),
    );
    const db = pgDb(stack().databaseUrl, { max: 2 });
    try {
      const quiet = { info() {}, warn() {}, error() {} };
      const counts = await drainOnce(db, createRegistry([workflow]), {
        budgetSeconds: 20,
        concurrency: 5,
        logger: quiet,
      });
      expect(counts.parked).toBe(1);
    } finally {
      await db.close();
    }
    const page = await newPage();
    await signIn(page, stack().url, ADMIN_TOKEN);
    await page.goto(`${stack().url}/#/jobs/${id}`);
    await page.locator('#job-steps-panel').waitFor();
    expect(await page.locator('#job-steps tr td:first-child').allTextContents()).toEqual(['start']);
    expect(await page.locator('#job-waiting').textContent()).toMatch(
      /^Waiting at step "approval" for event demo\.approved \(key order-7\) until /,
    );
    expect(await page.locator('#job-history li .event-kind').allTextContents()).toEqual([
      'Enqueued',
      'Claimed',
      'Parked at a step',
    ]);
  });

  it("changes a tenant's concurrency once confirmed", async () => {
    const page = await newPage();
    await signIn(page, stack().url, ADMIN_TOKEN);
    // The overview shows once its figures have loaded, which a loaded machine can take longer than an action's timeout for.
    await waitForShown(page, '#overview-view');
    await page.fill('#open-tenant-name', 'acme');
    await page.press('#open-tenant-name', 'Enter');
    await page.locator('#tenant-summary:has-text("running now")').waitFor();
    expect(await page.inputValue('#tenant-concurrency')).toBe('');

    await page.fill('#tenant-concurrency', '3');
    await page.click('#tenant-form button[type="submit"]');
    await confirm(page);
    expect(await noticeText(page)).toBe('Saved. Tenant acme: concurrency 3 · no rate limit · weight 1.');
    expect(await getTenant(stack().api, 'acme')).toMatchObject({
      concurrency: 3,
      rateLimit: null,
      weight: 1,
      custom: true,
    });
  });

  it('pauses a queue once confirmed, shows it paused with its settings kept, and resumes it', async () => {
    const page = await newPage();
    await signIn(page, stack().url, ADMIN_TOKEN);
    await waitForShown(page, '#overview-view');
    const row = page.locator('tr[data-queue="reports"]');
    await row.locator('button[data-queue-action="pause"]').click();
    await confirm(page);
    expect(await noticeText(page)).toBe('Paused. Queue reports keeps its waiting jobs until it is resumed.');
    const paused = (await queueSummaries(stack().api)).queues.find((queue) => queue.queue === 'reports');
    expect(paused).toMatchObject({ concurrency: 40, weight: 2, pausedAt: expect.any(String) });
    // The refreshed row says so, beside the settings it kept, and offers to resume.
    await row.locator('button[data-queue-action="resume"]').waitFor();
    expect(await row.locator('[data-settings]').textContent()).toMatch(/^paused since .+, cap 40, weight 2$/);

    await row.locator('button[data-queue-action="resume"]').click();
    await confirm(page);
    await row.locator('button[data-queue-action="pause"]').waitFor();
    const resumed = (await queueSummaries(stack().api)).queues.find((queue) => queue.queue === 'reports');
    expect(resumed).toMatchObject({ concurrency: 40, weight: 2, pausedAt: null });
    expect(await row.locator('[data-settings]').textContent()).toBe('cap 40, weight 2');
  });

  it('refuses the actions of a key without the scope for them, saying why', async () => {
    const id = await failedJob('reports-failing', 'globex');
    const readOnlyKey = await createKey(stack().api, ['read']);
    const page = await newPage();
    await signIn(page, stack().url, readOnlyKey);
    await page.locator('#overview-view').waitFor();

    await page.goto(`${stack().url}/#/jobs/${id}`);
    await page.locator('#job-status:text("Failed")').waitFor();
    await page.click('#job-retry');
    await confirm(page);
    expect(await noticeText(page)).toBe('Refused. Forbidden: this key lacks the enqueue or admin scope');
    expect((await getJob(stack().api, id)).status).toBe('failed');

    await page.goto(`${stack().url}/#/tenants/globex`);
    await page.locator('#tenant-summary:has-text("running now")').waitFor();
    await page.fill('#tenant-weight', '7');
    await page.click('#tenant-form button[type="submit"]');
    await confirm(page);
    expect(await noticeText(page)).toMatch(/^Refused\. Forbidden: this key lacks the admin\b/);
    expect((await getTenant(stack().api, 'globex')).weight).toBe(1);
  });

  it('shows wait and run times per queue and tenant as the API gives them, over the last hour and over 30 days', async () => {
    const { api } = stack();
    const claimed = await claimNext(api, 'emails');
    await completeJob(api, claimed.id, claimed.leaseToken, { sent: true });
    const page = await newPage();
    await signIn(page, stack().url, ADMIN_TOKEN);
    await page.locator('#timings-table tbody tr').first().waitFor();

    type TimingsRow = {
      queue: string;
      tenant: string;
      attempts: number;
      failed: number;
      waitMs: Percentiles;
      runMs: Percentiles;
    };
    type Percentiles = Record<'p50' | 'p95', number>;
    const duration = (ms: number) => (ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(1)} s`);
    /** What the table should show for the API's rows, and what it shows. */
    const expected = (rows: TimingsRow[]) =>
      rows.map((row) => [
        row.queue,
        row.tenant,
        String(row.attempts),
        String(row.failed),
        duration(row.waitMs.p50),
        duration(row.waitMs.p95),
        duration(row.runMs.p50),
        duration(row.runMs.p95),
      ]);
    const shown = () =>
      page
        .locator('#timings-table tbody tr')
        .evaluateAll((rows) => rows.map((row) => [...row.children].map((cell) => cell.textContent)));

    const { timings } = await attemptTimings(api, '1h');
    expect(timings.find((row) => row.queue === 'emails')).toMatchObject({ tenant: 'acme', attempts: 1, succeeded: 1 });
    expect(timings.find((row) => row.queue === 'reports-failing')).toMatchObject({ tenant: 'globex', succeeded: 0 });
    expect(await shown()).toEqual(expected(timings));

    await page.selectOption('#timings-window', '30d');
    const { totals } = await dailyAttemptStats(api, 30);
    expect(totals.map((row) => row.queue)).toEqual(timings.map((row) => row.queue));
    await expect.poll(shown).toEqual(expected(totals));
    expect(await page.locator('#timings-empty').isHidden()).toBe(true);
  });

  it('says when a request got no answer in 30 s, and still shows the view', async () => {
    const page = await newPage();
    // The throughput figures never come: the overview's other figures do.
    await page.route('**/v1/stats/throughput', () => {});
    await signIn(page, stack().url, ADMIN_TOKEN);
    await waitForShown(page, '#overview-view');
    expect(await page.locator('#notice').textContent()).toBe('No answer: the server did not answer in 30 s');
    expect(await page.locator('#nav').isVisible()).toBe(true);
  });

  it('fits a phone screen: the page itself never scrolls sideways', async () => {
    const page = await newPage(PHONE);
    await signIn(page, stack().url, ADMIN_TOKEN);
    await page.locator('tr[data-queue="emails"]').waitFor();
    expect(await page.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(PHONE.width);
  });

  it('sends a CSP with a nonce and no outside source, and may not be framed', async () => {
    const response = await fetch(`${stack().url}/`);
    const csp = response.headers.get('content-security-policy')!;
    expect(csp).toMatch(/script-src 'nonce-[A-Za-z0-9+/=]+'/);
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("frame-ancestors 'none'");
    expect(response.headers.get('x-frame-options')).toBe('DENY');
    expect(response.headers.get('referrer-policy')).toBe('no-referrer');
  });
  it('says beside a queue its rate limit, its held jobs by reason and its debounced ones', async () => {
    const { api } = stack();
    await setQueue(api, 'shaped', { concurrency: null, weight: 1, rateLimit: { count: 600, perSeconds: 60 } });
    // The second job of a key of one slot is held; a debounced job waits out its period.
    for (const payload of [1, 2])
      await enqueueManual(api, 'shaped', { tenant: 'acme', payload, concurrencyKey: 'store-7' });
    await enqueueManual(api, 'shaped', { tenant: 'acme', debounceKey: 'acct-7', debouncePeriodSeconds: 600 });
    // A queue that drops its excess says so.
    await setQueue(api, 'shed', {
      concurrency: null,
      weight: 1,
      rateLimit: { count: 5, perSeconds: 1, onExcess: 'drop' },
    });
    await enqueueManual(api, 'shed', { tenant: 'acme' });
    const page = await newPage();
    await signIn(page, stack().url, ADMIN_TOKEN);
    const row = page.locator('tr[data-queue="shaped"]');
    await waitForShown(page, 'tr[data-queue="shaped"]');
    expect(await row.locator('[data-settings]').textContent()).toBe(
      'rate 600 per 60 s, 1 held (1 key at its limit), 1 debounced',
    );
    const shed = page.locator('tr[data-queue="shed"] [data-settings]');
    await expect.poll(() => shed.textContent(), { timeout: 90_000 }).toBe('rate 5 per 1 s, excess dropped');
    expect((await queueSummaries(api)).queues.find((queue) => queue.queue === 'shaped')).toMatchObject({
      rateLimit: { count: 600, perSeconds: 60 },
      held: 1,
      heldBy: { concurrency: 1 },
      debounced: 1,
    });
  });
});

import { join } from 'node:path';
import { describe, it } from 'vitest';
import { projectRoot } from '../support/repository-root';
import { PHONE } from './support/chromium';
import { seedDemoData } from './support/demo-data';
import { claimNext, enqueueManual, failForGood, reportProgress } from './support/jobs';
import { ADMIN_TOKEN } from './support/stack';
import { signIn, useStackAndBrowser } from './support/suite';

/**
 * The pictures of the docs (docs/img), taken from the real stack over demo data. Only on
 * request (they change the tree): UPDATE_SCREENSHOTS=1 npx vitest run test/browser/screenshots.test.ts
 * A request on a machine without Chromium fails rather than skips.
 */
const IMAGES = join(projectRoot, 'docs/img');

describe.runIf(process.env.UPDATE_SCREENSHOTS === '1')('screenshots for the docs', () => {
  const { stack, newPage } = useStackAndBrowser();

  it('dashboard on a desktop and on a phone, a job, jobs by tag, a bulk retry asked, and a status page', {
    timeout: 120_000,
  }, async () => {
    const { api, url, databaseUrl } = stack();
    await seedDemoData(databaseUrl);

    const desktop = await newPage();
    await signIn(desktop, url, ADMIN_TOKEN);
    await desktop.locator('tr[data-queue="emails"]').waitFor();
    await desktop.screenshot({ path: join(IMAGES, 'dashboard.png'), fullPage: true });

    const phone = await newPage(PHONE);
    await signIn(phone, url, ADMIN_TOKEN);
    await phone.locator('tr[data-queue="emails"]').waitFor();
    await phone.screenshot({ path: join(IMAGES, 'dashboard-phone.png') });

    // A queue of its own, so the claim takes this job and not a demo one.
    await enqueueManual(api, 'order-hooks', {
      tenant: 'globex',
      payload: { url: 'https://hooks.globex.example/orders', event: 'order.paid' },
    });
    const failing = await claimNext(api, 'order-hooks');
    await failForGood(api, failing.id, failing.leaseToken, {
      message: 'HTTP 410 from hooks.globex.example: endpoint removed',
    });
    await desktop.goto(`${url}/#/jobs/${failing.id}`);
    await desktop.locator('#job-history li').nth(2).waitFor();
    await desktop.screenshot({ path: join(IMAGES, 'dashboard-job.png'), fullPage: true });

    for (const [customer, plan] of [
      ['4711', 'pro'],
      ['4712', 'team'],
      ['4713', 'pro'],
    ] as const) {
      await enqueueManual(api, 'invoices', {
        tenant: 'acme',
        payload: { customer, plan },
        tags: ['campaign:spring', `plan=${plan}`],
      });
    }
    await desktop.goto(`${url}/#/jobs?tag=campaign%3Aspring`);
    await desktop.locator('#jobs-table tbody tr').nth(2).waitFor();
    await desktop.screenshot({ path: join(IMAGES, 'dashboard-jobs.png'), fullPage: true });

    // A bulk retry of the webhooks' dead jobs, asked with the dry run's count.
    await desktop.goto(`${url}/#/jobs?queue=webhooks&status=failed`);
    await desktop.locator('#bulk-scope:text-is("queue webhooks, status failed")').waitFor();
    await desktop.click('#bulk-count');
    await desktop.locator('#confirm-dialog').waitFor();
    await desktop.screenshot({ path: join(IMAGES, 'dashboard-bulk.png') });
    await desktop.click('#confirm-dialog button[value="cancel"]');

    const exported = await enqueueManual(api, 'exports', { tenant: 'acme' });
    const running = await claimNext(api, 'exports');
    await reportProgress(api, running.id, running.leaseToken, { percent: 62, message: 'Rendering page 31 of 50' });
    const status = await newPage({ width: 640, height: 420 });
    const token = new URL(exported.statusUrl!).searchParams.get('token');
    await status.goto(`${url}/status/${exported.id}?token=${token}`);
    await status.locator('#progress-text:text-is("62% · Rendering page 31 of 50")').waitFor();
    await status.screenshot({ path: join(IMAGES, 'status-page.png') });
  });
});

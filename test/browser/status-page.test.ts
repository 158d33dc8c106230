import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { statusTokenSecret, statusTokenSigner } from '../../src/http/auth/status-token';
import { openPage, runBrowserTests } from './support/chromium';
import { startEmbedder, type Embedder } from './support/embedder';
import { claimNext, completeJob, enqueueManual, reportProgress } from './support/jobs';
import { ADMIN_TOKEN } from './support/stack';
import { unexpectedErrors, useStackAndBrowser } from './support/suite';

/** The HTML status page that goes with an enqueue answer's statusUrl (same job, same token). */
function statusPagePath(statusUrl: string | null): string {
  const url = new URL(statusUrl!);
  return `/status/${url.pathname.split('/').pop()}?token=${url.searchParams.get('token')}`;
}

/** A correctly signed token that expired an hour ago, signed with the secret `npm start` derives. */
async function expiredToken(jobId: string): Promise<string> {
  const secret = await statusTokenSecret({
    devMode: true,
    adminToken: ADMIN_TOKEN,
    statusTokenSecret: undefined,
    corsOrigins: [],
    maxBodyBytes: 1,
    logRequests: false,
  });
  const sign = await statusTokenSigner(secret!);
  return sign(jobId, Math.floor(Date.now() / 1000) - 3600);
}

describe.runIf(runBrowserTests)('status page in Chromium', () => {
  let embedder: Embedder;
  beforeAll(async () => {
    embedder = await startEmbedder();
  });
  afterAll(() => embedder?.close());
  const { stack, browser, newPage } = useStackAndBrowser(() => ({ corsOrigins: [embedder.origin] }));

  it('follows its job live, progress included, until it succeeds', async () => {
    const { api, url } = stack();
    const job = await enqueueManual(api, 'thumbnails', { payload: { secret: 'not for the page' } });
    const page = await newPage();
    await page.goto(url + statusPagePath(job.statusUrl));
    await page.locator('#status-badge:text-is("Queued")').waitFor();
    await page.locator('#live:text-is("Updating live")').waitFor();

    const claimed = await claimNext(api, 'thumbnails');
    await page.locator('#status-badge:text-is("Running")').waitFor();
    await reportProgress(api, claimed.id, claimed.leaseToken, { percent: 40, message: 'Resizing' });
    await page.locator('#progress-text:text-is("40% · Resizing")').waitFor();
    expect(await page.locator('#progress-bar').evaluate((bar) => (bar as unknown as { value: number }).value)).toBe(40);

    await completeJob(api, claimed.id, claimed.leaseToken, { thumbnails: 3 });
    await page.locator('#status-badge:text-is("Succeeded")').waitFor();
    await page.locator('#finished-row').waitFor();
    expect(await page.locator('#progress-row').isHidden()).toBe(true);
    await page.locator('#live:text-is("")').waitFor({ state: 'attached' });
    // biome-ignore lint/performance/useDomNodeTextContent: what the page shows, not its scripts' text
    const text = await page.locator('body').innerText();
    expect(text).not.toContain('not for the page');
    expect(text).not.toContain('thumbnails');
  });

  it('answers a forged, expired or borrowed token with 401 and no job data', async () => {
    const { api, url } = stack();
    const job = await enqueueManual(api, 'invoices', { tenant: 'acme' });
    const other = await enqueueManual(api, 'invoices', { tenant: 'acme' });
    const otherToken = new URL(other.statusUrl!).searchParams.get('token');
    const page = await newPage();
    for (const token of [`v1.9999999999.${'A'.repeat(43)}`, await expiredToken(job.id), otherToken, '']) {
      const response = await page.goto(`${url}/status/${job.id}?token=${token}`);
      expect(response!.status(), `token ${token}`).toBe(401);
      expect(await page.locator('h1').textContent()).toBe('This link has expired or is not valid');
      // biome-ignore lint/performance/useDomNodeTextContent: what the page shows, not its scripts' text
      const text = await page.locator('body').innerText();
      for (const secretish of ['invoices', 'acme', 'Queued']) expect(text).not.toContain(secretish);
    }
  });

  it('can be framed by the configured origins only, with ?embed=1 dropping its chrome', async () => {
    const { api, url } = stack();
    const job = await enqueueManual(api, 'embeds');
    const framed = encodeURIComponent(`${url}${statusPagePath(job.statusUrl)}&embed=1`);
    // Not newPage(): this page's errors are checked here, since it provokes some.
    const { page, errors } = await openPage(browser());

    await page.goto(`${embedder.origin}/?src=${framed}`);
    const frame = page.frameLocator('iframe');
    await frame.locator('#status-badge:text-is("Queued")').waitFor();
    expect(await frame.locator('body').getAttribute('class')).toBe('embed');
    expect(await frame.locator('.powered').count()).toBe(0);

    // The same page, framed by an origin not in CORS_ORIGINS; and the dashboard, which no one may frame.
    for (const site of [
      `${embedder.otherOrigin}/?src=${framed}`,
      `${embedder.origin}/?src=${encodeURIComponent(`${url}/`)}`,
    ]) {
      const refused = page.waitForEvent('console', (message) => message.text().includes('frame-ancestors'));
      await page.goto(site);
      await refused;
      // The frame switches to Chromium's error page a moment after the console says why.
      await expect.poll(() => page.frames().map((frame) => frame.url())).toContain('chrome-error://chromewebdata/');
    }
    await page.context().close();
    // Chromium reports each refusal as an error (sometimes twice); these were the point.
    const refusal = /violates the following Content Security Policy directive: "frame-ancestors ([^"]*)"/;
    const refused = new Set(errors.map((error) => refusal.exec(error)?.[1]));
    expect(refused).toEqual(new Set([`'self' ${embedder.origin}`, "'none'"]));
    expect(unexpectedErrors(errors.filter((error) => !refusal.test(error)))).toEqual([]);
  });
});

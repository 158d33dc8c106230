import type { Browser, Page, Request } from 'playwright-core';
import { afterAll, afterEach, beforeAll, expect } from 'vitest';
import { launchChromium, openPage, type Viewport } from './chromium';
import { startTestStack, type TestStack, type TestStackOptions } from './stack';

/** Starting wrangler dev and Chromium takes a few seconds each; they start side by side. */
const START_TIMEOUT_MS = 90_000;

export interface BrowserSuite {
  stack(): TestStack;
  browser(): Browser;
  /** A page in a fresh context; after the test it is closed, and it must have had no script or CSP error. */
  newPage(viewport?: Viewport): Promise<Page>;
}

/**
 * The stack and a browser for one test file, started before its tests and
 * stopped after. `options` is read when the stack starts, after the file's
 * earlier beforeAll hooks.
 */
export function useStackAndBrowser(options: () => TestStackOptions = () => ({})): BrowserSuite {
  let stack: TestStack | undefined;
  let browser: Browser | undefined;
  const pages: Array<{ page: Page; errors: string[] }> = [];
  beforeAll(async () => {
    const [startedStack, launched] = await Promise.allSettled([startTestStack(options()), launchChromium()]);
    if (startedStack.status === 'fulfilled') stack = startedStack.value;
    if (launched.status === 'fulfilled') browser = launched.value;
    for (const outcome of [startedStack, launched]) if (outcome.status === 'rejected') throw outcome.reason;
  }, START_TIMEOUT_MS);
  afterEach(async () => {
    for (const { page, errors } of pages.splice(0)) {
      await page.context().close();
      expect(unexpectedErrors(errors)).toEqual([]);
    }
  });
  afterAll(async () => {
    await browser?.close();
    await stack?.stop();
  });
  return {
    stack: () => stack!,
    browser: () => browser!,
    async newPage(viewport) {
      const opened = await openPage(browser!, viewport);
      pages.push(opened);
      trackRequests(opened.page);
      return opened.page;
    },
  };
}

/** Signs in on the dashboard with `key`, the way a person does: paste it, press Enter. */
export async function signIn(page: Page, baseUrl: string, key: string): Promise<void> {
  await page.goto(`${baseUrl}/`);
  await page.fill('#api-key', key);
  await page.press('#api-key', 'Enter');
}

/** Each page's requests without an answer yet, and when each was sent: what a view waits on. */
const requestsInFlight = new WeakMap<Page, Map<Request, number>>();

function trackRequests(page: Page): void {
  const inFlight = new Map<Request, number>();
  requestsInFlight.set(page, inFlight);
  page.on('request', (request) => inFlight.set(request, Date.now()));
  page.on('requestfinished', (request) => inFlight.delete(request));
  page.on('requestfailed', (request) => inFlight.delete(request));
}

/**
 * Waits for `selector` to show; when it does not, the failure says what the
 * page shows instead (the sign-in error, the notice) and which of its
 * requests were still without an answer, and for how long.
 */
export async function waitForShown(page: Page, selector: string, timeout = 90_000): Promise<void> {
  try {
    await page.locator(selector).waitFor({ timeout });
  } catch (error) {
    const shown = async (id: string) =>
      (await page.locator(id).isVisible()) ? `${id}: "${await page.locator(id).textContent()}"` : `${id} hidden`;
    const now = Date.now();
    const pending = [...(requestsInFlight.get(page) ?? [])].map(
      ([request, sentAt]) => `${request.method()} ${new URL(request.url()).pathname} for ${now - sentAt} ms`,
    );
    const state = [await shown('#sign-in-error'), await shown('#notice'), `in flight: ${pending.join(', ') || 'none'}`];
    throw new Error(`${selector} not shown in ${timeout} ms; ${state.join('; ')}`, { cause: error });
  }
}

/** Chromium reports each 4xx answer as a console error; the refusals the tests provoke are expected. */
export function unexpectedErrors(errors: readonly string[]): string[] {
  return errors.filter(
    (error) => !error.startsWith('Failed to load resource: the server responded with a status of 4'),
  );
}

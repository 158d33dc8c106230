import type { Browser, Page } from 'playwright-core';
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

/** Chromium reports each 4xx answer as a console error; the refusals the tests provoke are expected. */
export function unexpectedErrors(errors: readonly string[]): string[] {
  return errors.filter(
    (error) => !error.startsWith('Failed to load resource: the server responded with a status of 4'),
  );
}

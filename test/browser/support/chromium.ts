import { existsSync } from 'node:fs';
import { chromium, type Browser, type Page } from 'playwright-core';

/**
 * Debian's Chromium (`apt-get install -y chromium`; .ci/install-chromium.sh
 * installs it in CI), or the browser that CHROMIUM_PATH names.
 */
export const CHROMIUM_PATH = process.env.CHROMIUM_PATH || '/usr/bin/chromium';

const missing = `no Chromium at ${CHROMIUM_PATH} (install it with: apt-get install -y chromium, or set CHROMIUM_PATH)`;

/** CI as the usual variable says it (CI=true); CI=false or 0 is a machine that says it is not. */
const inCi = !['', 'false', '0'].includes(process.env.CI ?? '');

/**
 * Whether the browser tests run: on a machine without Chromium they are
 * skipped, with a warning; in CI they run, and fail at the launch when
 * Chromium is missing, so a CI without it never reports them green.
 */
export const runBrowserTests = inCi || existsSync(CHROMIUM_PATH);

if (!runBrowserTests) console.warn(`browser tests skipped: ${missing}`);

/** Headless and quiet: no network of its own (updates, sync, QUIC), a fresh temporary profile. */
export async function launchChromium(): Promise<Browser> {
  if (!existsSync(CHROMIUM_PATH)) throw new Error(`the browser tests need Chromium: ${missing}`);
  return await chromium.launch({
    executablePath: CHROMIUM_PATH,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}

export interface Viewport {
  width: number;
  height: number;
}

export const DESKTOP: Viewport = { width: 1280, height: 900 };
export const PHONE: Viewport = { width: 390, height: 844 };

/**
 * A page in a context of its own (own sessionStorage), recording every
 * script error and console error, CSP refusals included, for the test to
 * assert there were none.
 */
export async function openPage(
  browser: Browser,
  viewport: Viewport = DESKTOP,
): Promise<{ page: Page; errors: string[] }> {
  // A phone's screen is dense: its screenshots are taken at twice the pixels, as phones show them.
  const context = await browser.newContext({ viewport, deviceScaleFactor: viewport.width < 500 ? 2 : 1 });
  const page = await context.newPage();
  const errors: string[] = [];
  page.on('pageerror', (error) => errors.push(error.message));
  page.on('console', (message) => {
    if (message.type() === 'error') errors.push(message.text());
  });
  return { page, errors };
}

import { existsSync } from 'node:fs';
import { chromium, type Browser, type Page } from 'playwright-core';

/** Debian's Chromium (`apt-get install -y chromium`; .ci/install-chromium.sh installs it in CI). */
export const CHROMIUM_PATH = '/usr/bin/chromium';

export const hasChromium = existsSync(CHROMIUM_PATH);

if (!hasChromium) {
  console.warn(`browser tests skipped: no Chromium at ${CHROMIUM_PATH} (install it with: apt-get install -y chromium)`);
}

/** Headless and quiet: no network of its own (updates, sync, QUIC), a fresh temporary profile. */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({
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
export async function openPage(browser: Browser, viewport: Viewport = DESKTOP): Promise<{ page: Page; errors: string[] }> {
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

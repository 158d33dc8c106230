import { setTimeout as sleep } from 'node:timers/promises';
import { timeoutSignal } from '../drain/timeout-signal.js';
import { fetchFailureReason } from './fetch-failure.js';

export interface WaitForHealthyOptions {
  timeoutMs: number;
  /** Stops waiting: the promise then rejects with the abort reason. */
  signal: AbortSignal;
}

const POLL_MS = 250;
const REQUEST_TIMEOUT_MS = 5_000;

/**
 * Polls `GET url` until it answers 200. Until then wrangler refuses
 * connections, or the Worker answers 503 while the database is not reachable;
 * the last of those is what the timeout error reports.
 */
export async function waitForHealthy(url: string, { timeoutMs, signal }: WaitForHealthyOptions): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let lastAnswer = 'no answer';
  for (;;) {
    signal.throwIfAborted();
    const timeout = timeoutSignal(signal, REQUEST_TIMEOUT_MS);
    try {
      const response = await fetch(url, { signal: timeout.signal });
      if (response.status === 200) return;
      lastAnswer = `${response.status} ${(await response.text()).replace(/\s+/g, ' ').slice(0, 300)}`;
    } catch (error) {
      lastAnswer = fetchFailureReason(error);
    } finally {
      timeout.clear();
    }
    if (Date.now() >= deadline) {
      const waited = `${Math.round(timeoutMs / 1000)} s`;
      throw new Error(`${url} did not answer 200 within ${waited} (last answer: ${lastAnswer})`);
    }
    await sleep(POLL_MS, undefined, { signal });
  }
}

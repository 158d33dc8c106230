import { sleep } from '../engine/sleep.js';
import type { WakeUp } from './wake-up.js';

/**
 * Sleeps `ms`, or less when (given) work may have arrived: a job enqueued
 * during the pause would otherwise wait out the rest of it (the tail of
 * pickup latency on an idle worker, and most of it under steady load).
 */
export async function pause(
  ms: number,
  waitForWork: ((signal: AbortSignal) => Promise<void>) | undefined,
  stopped: AbortSignal,
): Promise<void> {
  if (waitForWork === undefined) return sleep(ms);
  const wait = waitSignal(stopped);
  try {
    await Promise.race([sleep(ms, wait.signal), waitForWork(wait.signal)]);
  } finally {
    wait.end();
  }
}

/** Until the loop is woken (an attempt ended, a claim came back), or (when given) work may have arrived, or it is stopped. */
export async function nextEvent(
  wake: WakeUp,
  waitForWork: ((signal: AbortSignal) => Promise<void>) | undefined,
  stopped: AbortSignal,
): Promise<'wake' | 'work'> {
  if (waitForWork === undefined) return wake.next().then(() => 'wake');
  const wait = waitSignal(stopped);
  try {
    return await Promise.race([
      wake.next().then(() => 'wake' as const),
      waitForWork(wait.signal).then(() => 'work' as const),
    ]);
  } finally {
    wake.abandon();
    wait.end();
  }
}

/** Why a wait the loop no longer needs is called off (made once: an abort without a reason builds a DOMException and its stack). */
const WAIT_OVER = new DOMException('the loop no longer waits', 'AbortError');

/**
 * The signal of one wait for work: aborted by `end()`, or when the loop is
 * stopped. The loop waits several times a job on an idle queue, on the way
 * from a notification to the claim and from the claim to the job's start;
 * AbortSignal.any, which Node builds with weak references on every call,
 * cost more there than the rest of the path.
 */
function waitSignal(stopped: AbortSignal): { signal: AbortSignal; end(): void } {
  const wait = new AbortController();
  const onStop = () => wait.abort(stopped.reason);
  if (stopped.aborted) onStop();
  else stopped.addEventListener('abort', onStop, { once: true });
  return {
    signal: wait.signal,
    end: () => {
      stopped.removeEventListener('abort', onStop);
      wait.abort(WAIT_OVER);
    },
  };
}

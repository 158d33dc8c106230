import { describe, expect, it } from 'vitest';
import { WakeUp } from './wake-up.js';

/** Whether `promise` has settled by the time the queued microtasks ran. */
async function settled(promise: Promise<unknown>): Promise<boolean> {
  let done = false;
  void promise.then(() => (done = true));
  await new Promise((resolve) => setTimeout(resolve, 0));
  return done;
}

describe('WakeUp', () => {
  it('wakes a waiting loop on notify', async () => {
    const wakeUp = new WakeUp();
    const waiting = wakeUp.next();
    expect(await settled(waiting)).toBe(false);
    wakeUp.notify();
    expect(await settled(waiting)).toBe(true);
  });

  it('keeps a notify that came while nobody waited, for the next wait only', async () => {
    const wakeUp = new WakeUp();
    wakeUp.notify();
    wakeUp.notify();
    expect(await settled(wakeUp.next())).toBe(true);
    expect(await settled(wakeUp.next())).toBe(false);
  });

  it('keeps a notify that came after a wait was abandoned (it lost a race)', async () => {
    const wakeUp = new WakeUp();
    const lost = wakeUp.next();
    wakeUp.abandon();
    wakeUp.notify();
    expect(await settled(lost)).toBe(false);
    expect(await settled(wakeUp.next())).toBe(true);
  });
});

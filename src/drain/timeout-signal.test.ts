import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { sleep } from '../engine/sleep.js';
import { timeoutSignal } from './timeout-signal.js';

setFlagsFromString('--expose-gc');
const collectGarbage = runInNewContext('gc') as () => void;

describe('timeoutSignal', () => {
  it('aborts with a TimeoutError after its time, even when garbage is collected meanwhile', async () => {
    const attempt = new AbortController();
    const { signal } = timeoutSignal(attempt.signal, 50);
    collectGarbage();
    await sleep(10);
    collectGarbage();
    await sleep(150);
    expect(signal.aborted).toBe(true);
    expect((signal.reason as Error).name).toBe('TimeoutError');
  });

  it('aborts with the reason of the signal it follows, and not later once cleared', async () => {
    const attempt = new AbortController();
    const followed = timeoutSignal(attempt.signal, 50);
    attempt.abort(new Error('deadline'));
    expect((followed.signal.reason as Error).message).toBe('deadline');

    const cleared = timeoutSignal(undefined, 30);
    cleared.clear();
    await sleep(80);
    expect(cleared.signal.aborted).toBe(false);
  });
});

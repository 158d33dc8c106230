import { describe, expect, it } from 'vitest';
import { FAILED_AUTHENTICATIONS_PER_WINDOW, FailedAuthentications } from './failed-authentications.js';

describe('FailedAuthentications', () => {
  it('turns a client away at its limit until its window ends, and no other client', async () => {
    const failures = new FailedAuthentications();
    const start = 1_000_000;
    for (let i = 0; i < FAILED_AUTHENTICATIONS_PER_WINDOW - 1; i++)
      await failures.recordFailure('a', undefined, start + i);
    expect(failures.retryAfterSeconds('a', start + 100)).toBeUndefined();

    await failures.recordFailure('a', undefined, start + 1_000);

    expect(failures.retryAfterSeconds('a', start + 1_000)).toBe(59);
    expect(failures.retryAfterSeconds('a', start + 59_500)).toBe(1);
    expect(failures.retryAfterSeconds('a', start + 60_000)).toBeUndefined();
    expect(failures.retryAfterSeconds('b', start + 1_000)).toBeUndefined();
    // A new window starts from nothing.
    await failures.recordFailure('a', undefined, start + 60_000);
    expect(failures.retryAfterSeconds('a', start + 60_001)).toBeUndefined();
  });

  it("turns a client away as soon as the rate limit binding refuses it, whatever this isolate's count", async () => {
    const failures = new FailedAuthentications();
    const keys: string[] = [];
    const binding = { limit: async ({ key }: { key: string }) => ({ success: keys.push(key) < 2 }) };

    await failures.recordFailure('203.0.113.9', binding, 0);
    expect(failures.retryAfterSeconds('203.0.113.9', 1)).toBeUndefined();
    await failures.recordFailure('203.0.113.9', binding, 1);

    expect(failures.retryAfterSeconds('203.0.113.9', 2)).toBe(60);
    expect(keys).toEqual(['skiplock-failed-auth:203.0.113.9', 'skiplock-failed-auth:203.0.113.9']);
  });
});

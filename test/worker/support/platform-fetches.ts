import { afterEach, beforeEach } from 'vitest';

/** A count of the subrequests made through the platform's `fetch`. */
export interface FetchCount {
  readonly count: number;
  reset(): void;
}

/**
 * Counts every fetch this isolate makes during each test of the file: over
 * Neon's HTTP driver, every statement. Counted at the platform's `fetch`,
 * apart from any count the drain keeps, so the two can be compared. A
 * Durable Object call is not a fetch.
 */
export function countPlatformFetches(): FetchCount {
  let count = 0;
  const platformFetch = globalThis.fetch;
  beforeEach(() => {
    count = 0;
    globalThis.fetch = (input, init) => {
      count += 1;
      return platformFetch(input, init);
    };
  });
  afterEach(() => {
    globalThis.fetch = platformFetch;
  });
  return {
    get count() {
      return count;
    },
    reset() {
      count = 0;
    },
  };
}

import { describe, expect, it } from 'vitest';
import { METRIC_BUCKET_BOUNDS_SECONDS, prometheusHistogram } from './metrics.js';

describe('prometheusHistogram', () => {
  it('folds log-scale buckets into cumulative ones at 1 ms, 4 ms, 16 ms ...', () => {
    // Bucket 0: 0 ms; 8: [3.4, 4) ms; 9: [4, 4.8) ms; 127: the last, about 35 days.
    const folded = prometheusHistogram({ '0': 2, '8': '3', '9': 1, '127': 1 });

    expect(METRIC_BUCKET_BOUNDS_SECONDS.slice(0, 3)).toEqual([0.001, 0.004, 0.016]);
    expect(folded.buckets.slice(0, 3)).toEqual([2, 5, 6]);
    expect(folded.buckets.at(-1)).toBe(6);
    expect(folded.count).toBe(7);
    expect(folded.sum).toBeCloseTo((3 * 2 ** (7.5 / 4) + 2 ** (8.5 / 4) + 2 ** (126.5 / 4)) / 1000, 6);
  });

  it('is all zeros for an empty histogram', () => {
    expect(prometheusHistogram({})).toEqual({ buckets: METRIC_BUCKET_BOUNDS_SECONDS.map(() => 0), count: 0, sum: 0 });
  });
});

import { describe, expect, it } from 'vitest';
import type { Job } from './types.js';
import { toJob, utcIso } from './job-json.js';

describe('utcIso', () => {
  it.each([
    ['2026-11-23T19:12:16.123456+00:00', '2026-11-23T19:12:16.123Z'],
    ['2026-11-23T19:12:16.9999+00:00', '2026-11-23T19:12:16.999Z'],
    ['2026-01-01T00:00:00.5+00:00', '2026-01-01T00:00:00.500Z'],
    ['2026-01-01T00:00:00+00:00', '2026-01-01T00:00:00.000Z'],
    ['2026-05-01T14:00:00.123456+02:00', '2026-05-01T12:00:00.123Z'],
    ['2026-05-01T00:30:00-05:30', '2026-05-01T06:00:00.000Z'],
  ])('writes %s as %s, as Date would', (postgres, api) => {
    expect(utcIso(postgres)).toBe(api);
    expect(utcIso(postgres)).toBe(new Date(postgres).toISOString().replace(/\.(\d{3})\d*Z$/, '.$1Z'));
  });

  it('leaves what Date cannot read as it is', () => {
    expect(utcIso('infinity')).toBe('infinity');
  });
});

describe('toJob', () => {
  it('writes each timestamp of each job in UTC, whether or not the job before had the same', () => {
    const times = ['2026-11-23T19:12:16.123456+00:00', '2026-11-23T19:12:17+02:00', '2026-11-23T19:12:16.123456+00:00'];
    const rows = [0, 0, 1, 2, 2].map((n, i) => ({
      runAt: times[n]!,
      createdAt: times[(n + 1) % 3]!,
      startedAt: i % 2 === 0 ? times[1]! : null,
      expiresAt: null,
      firstStartedAt: times[n]!,
      finishedAt: null,
      leaseExpiresAt: times[2 - n]!,
    }));
    const expected = rows.map((row) =>
      Object.fromEntries(
        Object.entries(row).map(([field, value]) => [field, value === null ? null : new Date(value).toISOString()]),
      ),
    );
    expect(rows.map((row) => toJob(row as unknown as Job))).toEqual(expected);
  });
});

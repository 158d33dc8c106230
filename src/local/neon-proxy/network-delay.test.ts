import { describe, expect, it } from 'vitest';
import { delayLine, networkDelayFrom } from './network-delay';

describe('delayLine', () => {
  it('delivers in the order sent, however the jitter draws', async () => {
    const send = delayLine({ roundTripMs: 2, jitterMs: 15 });
    const delivered: number[] = [];
    const sent = Array.from({ length: 200 }, (_, index) => index);
    await new Promise<void>((resolve) => {
      for (const index of sent) {
        send(() => {
          delivered.push(index);
          if (delivered.length === sent.length) resolve();
        });
      }
    });
    expect(delivered).toEqual(sent);
  });

  it('delivers at once with no delay set', () => {
    const delivered: string[] = [];
    delayLine({ roundTripMs: 0, jitterMs: 0 })(() => delivered.push('now'));
    expect(delivered).toEqual(['now']);
  });
});

describe('networkDelayFrom', () => {
  it('reads milliseconds, unset or empty as 0', () => {
    expect(networkDelayFrom({ NEON_PROXY_ROUND_TRIP_MS: '50', NEON_PROXY_JITTER_MS: '2.5' })).toEqual({
      roundTripMs: 50,
      jitterMs: 2.5,
    });
    expect(networkDelayFrom({ NEON_PROXY_ROUND_TRIP_MS: ' ' })).toEqual({ roundTripMs: 0, jitterMs: 0 });
  });

  it('refuses what is not a number of milliseconds from 0 to 10000, by name', () => {
    expect(() => networkDelayFrom({ NEON_PROXY_ROUND_TRIP_MS: '50ms' })).toThrow(
      'NEON_PROXY_ROUND_TRIP_MS must be a number of milliseconds from 0 to 10000, not "50ms"',
    );
    expect(() => networkDelayFrom({ NEON_PROXY_JITTER_MS: '-1' })).toThrow('NEON_PROXY_JITTER_MS must be');
    expect(() => networkDelayFrom({ NEON_PROXY_ROUND_TRIP_MS: '10001' })).toThrow('NEON_PROXY_ROUND_TRIP_MS must be');
  });
});

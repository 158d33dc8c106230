import { env } from 'cloudflare:workers';
import { describe, expect, it, vi } from 'vitest';
import { QueueClock } from '../../../src/worker/queue-clock';
import { scheduledDrain } from '../../../src/worker/drain';
import { countPlatformFetches } from '../support/platform-fetches';
import { drainRuntime } from '../support/databases';
import { DEV } from './support/jobs';

const fetches = countPlatformFetches();

/** A clock of its own per test: the Durable Object named for it. */
function freshClock(): QueueClock {
  return new QueueClock(env.SKIPLOCK_CLOCK!, `test-${crypto.randomUUID()}`);
}

const definitions = 'the same definitions';
const tick = (now: number, more: Partial<{ definitions: string; recheckMs: number }> = {}) => ({
  now,
  definitions,
  recheckMs: 3_600_000,
  holdMs: 25_000,
  ...more,
});

/**
 * The real clocks, with each lowering recorded as it is sent (its time) and held until the test
 * lets it through: `letThrough(n)` answers the n-th, once it has been sent.
 */
function heldLowerings() {
  const clocks = env.SKIPLOCK_CLOCK!;
  const gates: Array<() => void> = [];
  const lowerings: number[] = [];
  const namespace = {
    idFromName: (clockName: string) => clocks.idFromName(clockName),
    get: (id: DurableObjectId) => ({
      fetch: async (input: string, init?: RequestInit) => {
        const body = JSON.parse(String(init?.body)) as { op: string; at: number };
        if (body.op === 'lower') {
          lowerings.push(body.at);
          await new Promise<void>((resolve) => gates.push(resolve));
        }
        return clocks.get(id).fetch(input, init);
      },
    }),
  };
  const letThrough = async (nth: number) => {
    await vi.waitFor(() => expect(gates.length).toBeGreaterThanOrEqual(nth));
    gates[nth - 1]!();
  };
  return { namespace, lowerings, letThrough };
}

describe('the queue clock', () => {
  it('drains on its first tick, then not until the time a drain settled on', async () => {
    const clock = freshClock();
    const now = Date.now();

    const first = await clock.begin(tick(now));
    expect(first.drain).toBe(true);
    await clock.settle(now + 120_000, first.epoch);

    expect((await clock.begin(tick(now + 60_000))).drain).toBe(false);
    expect((await clock.begin(tick(now + 120_000))).drain).toBe(true);
  });

  it('a change lowered while a drain ran is not hidden by that drain settling later', async () => {
    const clock = freshClock();
    const now = Date.now();
    const drain = await clock.begin(tick(now));

    await clock.lower(now + 5_000);
    // This drain read "nothing until tomorrow" before the change: its settle only lowers.
    await clock.settle(now + 86_400_000, drain.epoch);

    expect((await clock.begin(tick(now + 4_000))).drain).toBe(false);
    expect((await clock.begin(tick(now + 5_000))).drain).toBe(true);
  });

  it('a change due after the time a running drain holds the clock for is not hidden by that drain settling', async () => {
    const clock = freshClock();
    const now = Date.now();
    const drain = await clock.begin(tick(now));

    // Later than the drain's hold (25 s): the clock's time does not move, but the drain's reading is now stale.
    await clock.lower(now + 40_000);
    await clock.lower(now + 50_000);
    await clock.settle(now + 86_400_000, drain.epoch);

    // The hold passes with the drain settled: the next drain is due by the change's time at the latest.
    const next = await clock.begin(tick(now + 40_000));
    expect(next.drain).toBe(true);
    await clock.settle(now + 86_400_000, next.epoch);
    // Settled with nothing lowered since: the drain's reading stands.
    expect((await clock.begin(tick(now + 50_000))).drain).toBe(false);
  });

  it('sends one lowering at a time from an isolate, and the changes made meanwhile in one lowering after it', async () => {
    const { namespace, lowerings, letThrough } = heldLowerings();
    const clock = new QueueClock(namespace, `test-${crypto.randomUUID()}`);
    const now = Date.now();
    await clock.settle(now + 86_400_000, (await clock.begin(tick(now))).epoch);
    const errors: unknown[] = [];
    const lower = (at: number) => clock.lowerCoalesced(at, (error) => errors.push(error));

    const first = lower(now + 1_800_000);
    // Made while the first lowering is in flight: they wait for its answer, then go in one lowering, at the earliest change's time.
    const second = lower(now + 30_000);
    const third = lower(now + 60_000);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(lowerings).toEqual([now + 1_800_000]);
    await letThrough(1);
    await vi.waitFor(() => expect(lowerings).toEqual([now + 1_800_000, now + 30_000]));
    await letThrough(2);
    await Promise.all([first, second, third]);

    expect(errors).toEqual([]);
    expect(lowerings).toEqual([now + 1_800_000, now + 30_000]);
    expect((await clock.begin(tick(now + 30_000))).drain).toBe(true);
  });

  it('does not wait for a lowering unanswered for 15 s: its request was cut off', async () => {
    const { namespace, lowerings, letThrough } = heldLowerings();
    const clock = new QueueClock(namespace, `test-${crypto.randomUUID()}`);
    const errors: unknown[] = [];
    const lower = (at: number) => clock.lowerCoalesced(at, (error) => errors.push(error));
    const now = vi.spyOn(Date, 'now');
    try {
      now.mockReturnValue(1_000_000);
      const first = lower(1);
      const second = lower(2);
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(lowerings).toEqual([1]);
      now.mockReturnValue(1_015_000);
      await vi.waitFor(() => expect(lowerings).toEqual([1, 2]));
      // The one cut off answers at last: the lowering in flight is still the second, which a new change waits for.
      await letThrough(1);
      await first;
      const third = lower(3);
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(lowerings).toEqual([1, 2]);
      await letThrough(2);
      await letThrough(3);
      await Promise.all([second, third]);
    } finally {
      now.mockRestore();
    }
    expect(lowerings).toEqual([1, 2, 3]);
    expect(errors).toEqual([]);
  });

  it('a drain that never settles holds the clock for its budget only', async () => {
    const clock = freshClock();
    const now = Date.now();
    await clock.begin(tick(now));

    expect((await clock.begin(tick(now + 10_000))).drain).toBe(false);
    expect((await clock.begin(tick(now + 25_000))).drain).toBe(true);
  });

  it('drains when the definitions change, and at the recheck however idle', async () => {
    const clock = freshClock();
    const now = Date.now();
    const first = await clock.begin(tick(now));
    await clock.settle(now + 86_400_000, first.epoch);

    expect((await clock.begin(tick(now + 60_000, { definitions: 'a new schedule' }))).drain).toBe(true);
    const later = await clock.begin(tick(now + 60_000, { definitions: 'a new schedule' }));
    expect(later.drain).toBe(false);
    expect((await clock.begin(tick(now + 3_660_000, { definitions: 'a new schedule' }))).drain).toBe(true);
  });

  it('a cron tick with nothing due runs no statement; the drain before it settled the clock', async () => {
    const settled: number[] = [];
    /** The real clock, told (as a database with nothing due would say) that the next work is 10 minutes away. */
    class IdleForTenMinutes extends QueueClock {
      override settle(at: number, epoch: number): Promise<void> {
        settled.push(at);
        return super.settle(Date.now() + 600_000, epoch);
      }
    }
    const clock = new IdleForTenMinutes(env.SKIPLOCK_CLOCK!, `test-${crypto.randomUUID()}`);
    const runtime = drainRuntime(DEV);

    const first = await scheduledDrain(runtime, '* * * * *', clock);
    expect(first.drained).toBe(true);
    expect(settled).toHaveLength(1);
    const statementsOfTheDrain = fetches.count;
    expect(statementsOfTheDrain).toBeGreaterThan(0);

    fetches.reset();
    const quiet = await scheduledDrain(runtime, '* * * * *', clock);

    expect(quiet).toEqual({ drained: false, subrequests: 1 });
    expect(fetches.count).toBe(0);
    console.log(JSON.stringify({ event: 'quiet-tick', statementsOfTheDrain, statementsOfTheQuietTick: fetches.count }));
  });

  it('drains as if no clock were bound when the clock does not answer, and says so in one line', async () => {
    const log = vi.spyOn(console, 'error').mockImplementation(() => {});
    const unreachable = new QueueClock({
      idFromName: (name: string) => name,
      get: () => ({ fetch: () => Promise.reject(new Error('no Durable Object answers here')) }),
    });

    const outcome = await scheduledDrain(drainRuntime(DEV), '* * * * *', unreachable);

    expect(outcome.drained).toBe(true);
    expect(log.mock.calls.map((call) => String(call[0]))).toEqual([
      expect.stringMatching(/the queue clock did not answer; draining without it.*no Durable Object answers here/),
    ]);
    log.mockRestore();
  });
});

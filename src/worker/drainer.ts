import { errorFields, jsonConsoleLogger } from '../drain/logger.js';
import type { DrainRuntime, helperDrain } from './drain.js';
import type { SkiplockEnv } from './env.js';

/** The part of a Durable Object's state a helper drain uses: its alarm. */
export interface DrainerState {
  readonly id: { toString(): string; readonly name?: string | undefined };
  storage: {
    getAlarm(): Promise<number | null>;
    setAlarm(scheduledTime: number): Promise<void>;
  };
}

/** A helper drain's Durable Object, as `skiplock.Drainer` makes it. */
export interface SkiplockDrainer {
  /** See SkiplockClock: how Workers' types recognise a Durable Object class. */
  readonly __DURABLE_OBJECT_BRAND: never;
  /** Starts the helper (any request: only the binding reaches it); a no-op while it runs or is about to. */
  fetch(request: Request): Promise<Response>;
  /** One drain; set again at once while drains find work. */
  alarm(): Promise<void>;
}

export type SkiplockDrainerClass<Env extends SkiplockEnv = SkiplockEnv> = new (
  state: DrainerState,
  env: Env,
) => SkiplockDrainer;

/** An environment's runtime and the helper drain, loaded with the first alarm. */
export interface HelperDrain {
  runtime: DrainRuntime;
  helperDrain: typeof helperDrain;
}

/**
 * The helper drains' Durable Object class for your job types (fan-out):
 * each instance drains in its own alarm, an invocation of its own, and sets
 * the alarm again while it finds work. Made by the factory, since the
 * helpers run your handlers: `export class SkiplockDrainer extends
 * skiplock.Drainer {}` (a class, so `wrangler types` can name it), bound as
 * SKIPLOCK_DRAINER.
 */
export function drainerClass<Env extends SkiplockEnv>(
  drainOf: (env: Env) => Promise<HelperDrain>,
): SkiplockDrainerClass<Env> {
  return class Drainer implements SkiplockDrainer {
    declare readonly __DURABLE_OBJECT_BRAND: never;
    private draining = false;

    constructor(
      private readonly state: DrainerState,
      private readonly env: Env,
    ) {}

    async fetch(): Promise<Response> {
      // A helper that drains now sets its own alarm again if it still finds work.
      if (!this.draining && (await this.state.storage.getAlarm()) === null)
        await this.state.storage.setAlarm(Date.now());
      return new Response(null, { status: 204 });
    }

    async alarm(): Promise<void> {
      this.draining = true;
      try {
        const name = this.state.id.name ?? this.state.id.toString();
        let drain: HelperDrain;
        try {
          drain = await drainOf(this.env);
        } catch (error) {
          // Misconfigured (the fetch handler answers 503 and logs why): retrying the alarm would not help.
          jsonConsoleLogger.error('helper drain not run', { name, ...errorFields(error) });
          return;
        }
        const counts = await drain.helperDrain(drain.runtime, name);
        if (counts !== undefined && counts.claimed > 0) await this.state.storage.setAlarm(Date.now());
      } finally {
        this.draining = false;
      }
    }
  };
}

import type { SubrequestBudget } from '../drain/subrequest-budget.js';
import { sleep } from '../engine/sleep.js';
import type { ObjectNamespace } from './object-namespace.js';

/**
 * The queue clock: when the queue next has work, kept where a Cron Trigger
 * reads it without touching the database, so an idle queue runs no statement
 * and Neon can suspend its compute. A Durable Object, because its storage is
 * strongly consistent and each instance runs one request at a time: KV can
 * show a value up to a minute old (a lowered due time missed is a delayed job
 * late), and the Cache API is per data centre while crons run anywhere.
 *
 * Who writes it: every request that changes the queue lowers it to now; a
 * cron drain, when it ends, sets it to what the database says is next (see
 * engine/next-due). A drain's setting cannot hide a lowering that raced it:
 * each change moves an epoch on, and a setting made on an older epoch only
 * lowers. A drain that dies leaves the time it was given to finish, after
 * which the next tick drains again.
 */

/** What the Durable Object keeps. */
interface ClockState {
  /** When a drain next has work (ms since the epoch); 0 until a drain has said. */
  dueAt: number;
  /** Moves on at every change, so a drain can tell whether its reading is still the latest. */
  epoch: number;
  /** The job types, schedules and settings the last drain ran with: a deploy that changes them drains at once. */
  definitions: string;
  /** When the last drain began: a safety recheck runs after `recheckMs` however idle the clock says the queue is. */
  lastDrainAt: number;
  /**
   * The epoch is the one the last `begin` handed a drain: a lowering must move
   * it on, and store that. Unset (a state stored before it was kept) counts as yes.
   */
  epochHandedOut?: boolean;
}

type ClockRequest =
  | { op: 'begin'; now: number; definitions: string; recheckMs: number; holdMs: number }
  | { op: 'lower'; at: number }
  | { op: 'settle'; at: number; epoch: number };

/** The answer to `begin`: whether this tick drains, and the epoch its settle must present. */
export interface ClockTick {
  drain: boolean;
  epoch: number;
}

/** The part of a Durable Object's state the clock uses. */
export interface ClockStorage {
  storage: {
    get<T>(key: string): Promise<T | undefined>;
    put<T>(key: string, value: T): Promise<void>;
  };
}

const STATE_KEY = 'clock';

/**
 * The queue clock's Durable Object. Export it from your Worker's module
 * (`export { SkiplockClock } from 'skiplock/worker'`) and bind it as
 * SKIPLOCK_CLOCK; without the binding every cron tick drains.
 */
export class SkiplockClock {
  /**
   * How Workers' types (`wrangler types`) recognise a Durable Object class;
   * their `DurableObject` base class carries it. Declared rather than
   * inherited: importing `cloudflare:workers` would stop the package loading in Node.
   */
  declare readonly __DURABLE_OBJECT_BRAND: never;
  private state: ClockState | undefined;

  constructor(private readonly durable: ClockStorage) {}

  async fetch(request: Request): Promise<Response> {
    const body = (await request.json()) as ClockRequest;
    // Storage calls hold other requests back (input gates): each request reads and writes the state alone.
    const state = (this.state ??= (await this.durable.storage.get<ClockState>(STATE_KEY)) ?? {
      dueAt: 0,
      epoch: 0,
      definitions: '',
      lastDrainAt: 0,
    });
    let answer: ClockTick | null = null;
    switch (body.op) {
      case 'begin': {
        const drain =
          state.dueAt <= body.now ||
          state.definitions !== body.definitions ||
          body.now - state.lastDrainAt >= body.recheckMs;
        if (drain) {
          // Should this drain never settle, the tick after its budget drains again.
          state.dueAt = body.now + body.holdMs;
          state.definitions = body.definitions;
          state.lastDrainAt = body.now;
          state.epoch += 1;
          state.epochHandedOut = true;
        }
        answer = { drain, epoch: state.epoch };
        break;
      }
      case 'lower':
        // Already due by then, and no drain's settle could match the epoch: nothing to change or store.
        // (A busy queue lowers the clock on every change, so this is most lowerings.)
        if (state.dueAt <= body.at && state.epochHandedOut === false) return Response.json(null);
        state.dueAt = Math.min(state.dueAt, body.at);
        state.epoch += 1;
        state.epochHandedOut = false;
        break;
      case 'settle':
        state.dueAt = state.epoch === body.epoch ? body.at : Math.min(state.dueAt, body.at);
        state.epoch += 1;
        state.epochHandedOut = false;
        break;
      default:
        return new Response('unknown clock operation', { status: 400 });
    }
    await this.durable.storage.put(STATE_KEY, state);
    return Response.json(answer);
  }
}

/** The SKIPLOCK_CLOCK binding: a Durable Object namespace of SkiplockClock. */
export type ClockNamespace<Id = unknown> = ObjectNamespace<Id>;

/** An isolate's lowerings of one clock (see `lowerCoalesced`). */
interface LoweringState {
  /** Lowerings sent so far. */
  sent: number;
  /** The earliest change not yet in a lowering sent, if any. */
  pendingAt: number | undefined;
  /** The lowering in flight, if any. */
  inFlight: { sentAt: number } | undefined;
}

/** The isolate's lowerings, by clock namespace and name. */
const lowerings = new WeakMap<ClockNamespace, Map<string, LoweringState>>();
/** How often a change waiting for the lowering in flight looks whether it was answered. */
const LOWERING_POLL_MS = 5;
/** A lowering unanswered this long was cut off with its request. */
const LOWERING_STALE_MS = 15_000;

/** A Worker's handle on its queue clock; every call is one subrequest. */
export class QueueClock {
  /** @param name the clock's Durable Object: one per queue database. */
  constructor(
    private readonly namespace: ClockNamespace,
    private readonly name = 'skiplock',
  ) {}

  /** The clock of this environment, when SKIPLOCK_CLOCK is bound. */
  static of(env: { SKIPLOCK_CLOCK?: ClockNamespace | undefined }): QueueClock | undefined {
    return env.SKIPLOCK_CLOCK === undefined ? undefined : new QueueClock(env.SKIPLOCK_CLOCK);
  }

  /**
   * A cron tick asks whether to drain: yes when work is due, when the
   * definitions changed, or when the last drain is `recheckMs` old; a yes
   * holds the clock for `holdMs`, the drain's time to settle it.
   */
  async begin(
    tick: { now: number; definitions: string; recheckMs: number; holdMs: number },
    subrequests?: SubrequestBudget,
  ): Promise<ClockTick> {
    return (await this.send({ op: 'begin', ...tick }, subrequests)) as ClockTick;
  }

  /** Something changed in the queue: the next tick drains. */
  async lower(at: number, subrequests?: SubrequestBudget): Promise<void> {
    await this.send({ op: 'lower', at }, subrequests);
  }

  /**
   * `lower`, with at most one lowering of this clock in flight from the
   * isolate. A change made while one is in flight waits for its answer, then
   * goes in the next lowering, which the first of the waiting requests sends
   * with every change made until then; the others find it sent and end. So
   * each change is followed by a lowering sent after it, which is what the
   * epoch needs (a drain that read the database before the change cannot
   * settle past it); each request sends at most one, within its own
   * subrequests and I/O; and a busy isolate sends about one per round trip to
   * the clock rather than one per request. A failed lowering goes to
   * `onError`, and its changes wait for the next drain, as before.
   */
  async lowerCoalesced(at: number, onError: (error: unknown) => void): Promise<void> {
    let states = lowerings.get(this.namespace);
    if (states === undefined) lowerings.set(this.namespace, (states = new Map()));
    let state = states.get(this.name);
    if (state === undefined) states.set(this.name, (state = { sent: 0, pendingAt: undefined, inFlight: undefined }));
    const sentBefore = state.sent;
    state.pendingAt = Math.min(state.pendingAt ?? at, at);
    for (;;) {
      if (state.sent > sentBefore) return;
      const { inFlight } = state;
      // One unanswered for long was cut off with its request: not waited for.
      if (inFlight === undefined || Date.now() - inFlight.sentAt >= LOWERING_STALE_MS) break;
      await sleep(LOWERING_POLL_MS);
    }
    const lowerAt = state.pendingAt ?? at;
    const mine = { sentAt: Date.now() };
    state.pendingAt = undefined;
    state.sent += 1;
    state.inFlight = mine;
    try {
      await this.lower(lowerAt);
    } catch (error) {
      onError(error);
    } finally {
      if (state.inFlight === mine) state.inFlight = undefined;
    }
  }

  /** A drain's reading of when the queue next has work, taken after `begin` answered `epoch`. */
  async settle(at: number, epoch: number, subrequests?: SubrequestBudget): Promise<void> {
    await this.send({ op: 'settle', at, epoch }, subrequests);
  }

  private async send(request: ClockRequest, subrequests: SubrequestBudget | undefined): Promise<unknown> {
    subrequests?.spend();
    const stub = this.namespace.get(this.namespace.idFromName(this.name));
    const response = await stub.fetch('https://skiplock-clock/', { method: 'POST', body: JSON.stringify(request) });
    if (!response.ok) throw new Error(`the queue clock answered ${response.status}: ${await response.text()}`);
    return response.json();
  }
}

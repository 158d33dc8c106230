import type { Query, Queryable } from '../db/types.js';
import { InvalidInputError } from './errors.js';
import { checkEventKey, checkEventName } from './steps.js';
import type { Json } from './types.js';

export interface SendEventInput {
  /** The event's name, as jobs wait for it (`ctx.step.waitForEvent(name, { event })`). */
  event: string;
  /** Only waits for this key (and waits without a key) take it. */
  key?: string;
  payload?: Json;
  /** The tenant whose jobs it reaches. Default `default`. */
  tenant?: string;
  /**
   * How long it is kept for jobs that reach their wait later (the last event
   * of each name and key per tenant): default one day, 0 keeps nothing, at
   * most 365 days. A wait takes a kept event only if its job was created before the event was sent.
   */
  keepSeconds?: number;
}

export interface SentEvent {
  event: string;
  key: string | null;
  tenant: string;
  sentAt: string;
  /** Jobs it resumed: those that waited for it when it was sent. */
  woken: number;
}

export const DEFAULT_EVENT_KEEP_SECONDS = 86_400;
export const MAX_EVENT_KEEP_SECONDS = 365 * 86_400;

/** One statement: skiplock.send_event in migrations/0004_durable_steps.sql. */
const sendEventSql = /* sql */ `
SELECT skiplock.send_event($1::text, $2::jsonb, $3::text, $4::text, make_interval(secs => $5::float8)) AS sent`;

/**
 * The send as a query object, for a caller's own transaction (as
 * `enqueueQuery`): the waiting jobs resume exactly when it commits.
 */
export function sendEventQuery(input: SendEventInput): Query {
  checkEventName(input.event, 'event');
  if (input.key !== undefined) checkEventKey(input.key, 'key');
  const keep = input.keepSeconds ?? DEFAULT_EVENT_KEEP_SECONDS;
  if (!Number.isFinite(keep) || keep < 0 || keep > MAX_EVENT_KEEP_SECONDS) {
    throw new InvalidInputError(`keepSeconds must be from 0 to ${MAX_EVENT_KEEP_SECONDS}`, 'keepSeconds');
  }
  return {
    name: 'skiplock_send_event',
    text: sendEventSql,
    params: [input.event, JSON.stringify(input.payload ?? null), input.tenant ?? 'default', input.key ?? null, keep],
  };
}

/**
 * Sends an event: every job of the tenant waiting for it (its name, and its
 * key when the wait named one) gets `{ payload, sentAt }` as its wait step's
 * result and resumes, all in one statement, each exactly once. Through a
 * caller's client it joins the caller's transaction.
 */
export async function sendEvent(db: Queryable, input: SendEventInput): Promise<SentEvent> {
  const [row] = await db.query<{ sent: SentEvent }>(sendEventQuery(input));
  return row!.sent;
}

import type { Queryable } from '../db/types.js';
import type { OrderingOnFailure, RateOnExcess } from './enqueue.js';
import { InvalidInputError } from './errors.js';

/**
 * A concurrency, ordering or rate key in use: one with a job waiting,
 * running or held, held itself by a failed head, or (a rate key) with
 * starts in its window. Keys are per tenant (skiplock.concurrency_keys;
 * migrations/0006_concurrency_keys.sql, 0008_rate_limited_keys.sql).
 */
export interface ConcurrencyKey {
  tenant: string;
  key: string;
  /** An ordering key: one slot, turns in enqueue order. */
  ordered: boolean;
  /** Jobs of the key past their turn at most (the latest job's concurrencyLimit); null for a rate key. */
  slots: number | null;
  /** Slots taken now: jobs waiting to start, running, retrying or parked (a rate key: turns given, not yet started). */
  taken: number;
  /** A rate key's limit (its latest job's), its starts in the window now, and when the window next has room for held jobs. */
  rate: {
    limit: number;
    periodSeconds: number;
    onExcess: RateOnExcess;
    startsInWindow: number;
    nextRoomAt: string | null;
  } | null;
  /** Jobs held for a turn. */
  held: number;
  onFailure: OrderingOnFailure;
  /** The failed head that holds an ordering key (it waits for an operator), and since when. */
  blockedBy: string | null;
  blockedAt: string | null;
}

export interface ListKeysOptions {
  tenant?: string;
  /** Only keys held by a failed head. */
  blocked?: boolean;
  /** The nextCursor of the previous page. */
  cursor?: string;
  /** Page size; default 50. */
  limit?: number;
}

export interface ConcurrencyKeyPage {
  keys: ConcurrencyKey[];
  /** Where the next page starts; null on the last. */
  nextCursor: string | null;
}

const listKeysSql = /* sql */ `
SELECT c.tenant, c.key, c.ordered, c.slots, c.taken, c.on_failure AS "onFailure",
       CASE WHEN c.rate_limit IS NOT NULL THEN json_build_object(
         'limit', c.rate_limit, 'periodSeconds', c.rate_seconds, 'onExcess', c.rate_mode,
         'startsInWindow', skiplock.window_starts(c.starts, c.rate_seconds, now()),
         'nextRoomAt', skiplock.iso(c.refill_at)) END AS rate,
       (SELECT count(*)::integer FROM skiplock.keyed_jobs kj
        WHERE kj.tenant = c.tenant AND kj.key = c.key AND kj.slot = 'waiting') AS held,
       c.blocked_by AS "blockedBy", skiplock.iso(c.blocked_at) AS "blockedAt"
FROM skiplock.concurrency_keys c
WHERE ($1::text IS NULL OR c.tenant = $1)
  AND (NOT $2::boolean OR c.blocked_by IS NOT NULL)
  AND ($3::text IS NULL OR (c.tenant, c.key) > ($3, $4::text))
ORDER BY c.tenant, c.key
LIMIT $5`;

/** The keys in use, in (tenant, key) order, with their slots or rate and held jobs. */
export async function listKeys(db: Queryable, options: ListKeysOptions = {}): Promise<ConcurrencyKeyPage> {
  const limit = options.limit ?? 50;
  const after = options.cursor === undefined ? undefined : decodeCursor(options.cursor);
  const rows = await db.query<ConcurrencyKey>({
    name: 'skiplock_list_keys',
    text: listKeysSql,
    params: [options.tenant ?? null, options.blocked ?? false, after?.[0] ?? null, after?.[1] ?? null, limit + 1],
  });
  const keys = rows.slice(0, limit);
  const last = keys[keys.length - 1];
  return { keys, nextCursor: rows.length > limit && last ? encodeCursor(last.tenant, last.key) : null };
}

function encodeCursor(tenant: string, key: string): string {
  return btoa(encodeURIComponent(JSON.stringify([tenant, key])));
}

function decodeCursor(cursor: string): [string, string] {
  try {
    const after: unknown = JSON.parse(decodeURIComponent(atob(cursor)));
    if (Array.isArray(after) && after.length === 2 && after.every((part) => typeof part === 'string')) {
      return after as [string, string];
    }
  } catch {
    // Refused below, as any other text.
  }
  throw new InvalidInputError('cursor is not one this API issued', 'cursor');
}

/**
 * Lets an ordering key held by its failed head go on: its next job takes
 * the turn (retrying the head instead runs it first). False when the key is
 * not held.
 */
export async function unblockKey(db: Queryable, key: string, scope: { tenant: string }): Promise<boolean> {
  const [row] = await db.query<{ unblocked: boolean }>({
    name: 'skiplock_unblock_key',
    text: 'SELECT skiplock.unblock_key($1, $2) AS unblocked',
    params: [scope.tenant, key],
  });
  return row!.unblocked;
}

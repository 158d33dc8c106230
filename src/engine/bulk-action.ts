import type { Queryable } from '../db/types.js';
import { cancelBatch } from './bulk-cancel.js';
import { countMatching } from './bulk-count.js';
import { deleteBatch } from './bulk-delete.js';
import {
  type BatchOutcome,
  type BulkFilter,
  decodeBulkCursor,
  encodeBulkCursor,
  filterParam,
  FIRST_ID,
  isEmptyFilter,
} from './bulk-filter.js';
import { rescheduleBatch } from './bulk-reschedule.js';
import { retryBatch } from './bulk-retry.js';
import { InvalidInputError } from './errors.js';
import type { TenantScope } from './read-jobs.js';
import type { RescheduleChange } from './reschedule.js';
import type { JobStatus } from './types.js';

export const BULK_ACTIONS = ['retry', 'cancel', 'reschedule', 'delete', 'redrive'] as const;
export type BulkActionName = (typeof BULK_ACTIONS)[number];

/** Rows one batch statement takes, each batch its own short transaction. */
export const DEFAULT_BULK_BATCH = 500;
export const MAX_BULK_BATCH = 1000;
/** The largest `limit` a bulk action takes. */
export const MAX_BULK_LIMIT = 10_000_000;

export interface BulkActionRequest {
  action: BulkActionName;
  /** Which jobs; an empty or missing filter needs `all: true`. */
  filter?: BulkFilter;
  /** Says that an empty filter means every job (of the caller's tenant, for a tenant-bound caller). */
  all?: boolean;
  /** Counts the jobs the action would take, by status, and changes nothing. */
  dryRun?: boolean;
  /** At most this many jobs, oldest first (in id order); a continued call counts afresh. */
  limit?: number;
  /** The `nextCursor` of a call that stopped at `maxBatches`: carries on after the last job it took. */
  cursor?: string;
  /** Jobs per batch statement, 1 to MAX_BULK_BATCH; default DEFAULT_BULK_BATCH. */
  batchSize?: number;
  /** Stop after this many batches and answer a `nextCursor` (a Worker request's subrequests are counted). */
  maxBatches?: number;
  /**
   * After each batch, wait this many times as long as the batch took: 1 by
   * default, so the action has the database at most half the time and a
   * drain beside it keeps most of its pace; 0 runs the batches back to back.
   */
  pauseFactor?: number;
  /** reschedule: the new priority, start time or delay (as `reschedule` takes for one job). */
  change?: RescheduleChange;
  /** redrive: move the jobs into this queue (they keep theirs when left out). */
  toQueue?: string;
}

export interface BulkActionResult {
  action: BulkActionName;
  dryRun: boolean;
  /**
   * The jobs the action took: matching the filter and in a state it acts on
   * (a dry run: all there are, up to `limit`).
   */
  matched: number;
  /** Of those, the ones changed; the rest were changed by someone else first, or the action could not apply (see the docs). */
  changed: number;
  /** cancel: of `changed`, running jobs asked to stop at their next heartbeat (the rest ended cancelled). */
  cancelRequested?: number;
  /** A dry run: the matched jobs by status. */
  byStatus?: Partial<Record<JobStatus, number>>;
  /** Batch statements run (each its own transaction). */
  batches: number;
  /** Set when `maxBatches` stopped the call before the end: pass it back as `cursor` to carry on. */
  nextCursor: string | null;
}

const LIVE_STATES = ['scheduled', 'queued', 'retrying', 'running', 'parked', 'held'];
const WAITING_OR_HELD = ['scheduled', 'queued', 'retrying', 'held'];
/** The states each action acts on, in the live table and in the history. */
const ACTS_ON: Record<BulkActionName, { live: string[]; finished: string[] }> = {
  retry: { live: [], finished: ['failed', 'cancelled', 'expired'] },
  redrive: { live: [], finished: ['failed', 'expired'] },
  cancel: { live: LIVE_STATES, finished: [] },
  reschedule: { live: WAITING_OR_HELD, finished: [] },
  delete: { live: [], finished: ['succeeded', 'failed', 'cancelled', 'expired'] },
};

/**
 * Retries, cancels, reschedules, deletes or redrives every job matching a
 * filter, in batches of `batchSize` jobs in id order: each batch is one
 * statement in its own transaction that takes its rows with FOR UPDATE SKIP
 * LOCKED, so a claim running beside it is never waited for and never waits
 * longer than one batch, and between batches it pauses (`pauseFactor`) so
 * that a drain keeps most of the database's time. Each changed job gets the event its single-job
 * action writes, with `detail.bulk` naming the action. Redrive is retry of
 * the dead-letter set: failed jobs (expired ones too when the filter's
 * status names them), optionally into `toQueue`.
 */
export async function bulkAction(
  db: Queryable,
  request: BulkActionRequest,
  scope: TenantScope = {},
): Promise<BulkActionResult> {
  const { action, dryRun = false } = request;
  const batchSize = request.batchSize ?? DEFAULT_BULK_BATCH;
  checkRequest(request, batchSize);
  let filter: BulkFilter = request.filter ?? {};
  if (action === 'redrive' && filter.status === undefined) filter = { ...filter, status: 'failed' };
  const empty = { action, dryRun, matched: 0, changed: 0, batches: 0, nextCursor: null };
  if (scope.tenant !== undefined) {
    // A tenant-bound caller naming another tenant reaches no job.
    if (filter.tenant !== undefined && filter.tenant !== scope.tenant)
      return dryRun ? { ...empty, byStatus: {} } : empty;
    filter = { ...filter, tenant: scope.tenant };
  }
  const param = filterParam(filter);
  const states = ACTS_ON[action];
  let after = request.cursor === undefined ? FIRST_ID : decodeBulkCursor(request.cursor);

  if (dryRun) {
    const byStatus = await countMatching(db, {
      filter: param,
      after,
      liveStates: states.live,
      finishedStates: states.finished,
      limit: request.limit,
    });
    const matched = Object.values(byStatus).reduce((sum, jobs) => sum + jobs, 0);
    return { ...empty, matched, byStatus };
  }

  const result: BulkActionResult = { ...empty, ...(action === 'cancel' ? { cancelRequested: 0 } : {}) };
  const pauseFactor = request.pauseFactor ?? 1;
  let pauseMs = 0;
  for (;;) {
    const size = Math.min(batchSize, (request.limit ?? Number.POSITIVE_INFINITY) - result.matched);
    if (size <= 0) break;
    if (request.maxBatches !== undefined && result.batches >= request.maxBatches) {
      result.nextCursor = encodeBulkCursor(after);
      break;
    }
    if (result.batches > 0 && pauseMs > 0) await new Promise((resolve) => setTimeout(resolve, pauseMs));
    const started = Date.now();
    const outcome = await runBatch(db, request, { filter: param, after, size, states: states.finished });
    pauseMs = (Date.now() - started) * pauseFactor;
    result.batches++;
    result.matched += outcome.matched;
    result.changed += outcome.changed;
    if (result.cancelRequested !== undefined) result.cancelRequested += outcome.requested ?? 0;
    if (outcome.last_id === null || outcome.matched < size) break;
    after = outcome.last_id;
  }
  return result;
}

function runBatch(
  db: Queryable,
  request: BulkActionRequest,
  batch: { filter: string; after: string; size: number; states: readonly string[] },
): Promise<BatchOutcome> {
  switch (request.action) {
    case 'retry':
    case 'redrive':
      return retryBatch(db, { ...batch, toQueue: request.toQueue, action: request.action });
    case 'cancel':
      return cancelBatch(db, batch);
    case 'delete':
      return deleteBatch(db, batch);
    case 'reschedule': {
      const { priority, runAt, delaySeconds } = request.change!;
      const at = runAt instanceof Date ? runAt.toISOString() : runAt;
      return rescheduleBatch(db, { ...batch, priority, runAt: at, delaySeconds });
    }
  }
}

/** Refuses, by the name of the field, what no batch could do; nothing has changed yet. */
function checkRequest(request: BulkActionRequest, batchSize: number): void {
  if (!BULK_ACTIONS.includes(request.action)) {
    throw new InvalidInputError(`action must be one of ${BULK_ACTIONS.join(', ')}, not "${request.action}"`, 'action');
  }
  if (isEmptyFilter(request.filter ?? {}) && request.all !== true) {
    throw new InvalidInputError(
      'a bulk action without a filter reaches every job: give a filter, or all: true to mean every job',
      'all',
    );
  }
  wholeNumber(request.limit, 'limit', 1, MAX_BULK_LIMIT);
  wholeNumber(batchSize, 'batchSize', 1, MAX_BULK_BATCH);
  wholeNumber(request.maxBatches, 'maxBatches', 1, Number.MAX_SAFE_INTEGER);
  const pause = request.pauseFactor;
  if (pause !== undefined && !(pause >= 0 && pause <= 100)) {
    throw new InvalidInputError(`pauseFactor must be a number from 0 to 100, not ${pause}`, 'pauseFactor');
  }
  if (request.action === 'reschedule') checkChange(request.change);
  else if (request.change !== undefined) throw new InvalidInputError('change goes with reschedule only', 'change');
  if (request.toQueue !== undefined) {
    if (request.action !== 'redrive') throw new InvalidInputError('toQueue goes with redrive only', 'toQueue');
    if (request.toQueue.length < 1 || request.toQueue.length > 128) {
      throw new InvalidInputError('toQueue must be a queue name of 1 to 128 characters', 'toQueue');
    }
  }
}

function checkChange(change: RescheduleChange | undefined): void {
  if (change === undefined || Object.values(change).every((value) => value === undefined)) {
    throw new InvalidInputError('reschedule needs a change: priority, runAt or delaySeconds', 'change');
  }
  wholeNumber(change.priority, 'change.priority', -1000, 1000);
  if (change.runAt !== undefined && change.delaySeconds !== undefined) {
    throw new InvalidInputError('give runAt or delaySeconds, not both', 'change.delaySeconds');
  }
  if (change.runAt !== undefined && Number.isNaN(new Date(change.runAt).getTime())) {
    throw new InvalidInputError(`runAt must be an ISO-8601 time, not "${String(change.runAt)}"`, 'change.runAt');
  }
  if (change.delaySeconds !== undefined && !(change.delaySeconds >= 0 && Number.isFinite(change.delaySeconds))) {
    throw new InvalidInputError('delaySeconds must be a number of seconds from 0', 'change.delaySeconds');
  }
}

function wholeNumber(value: number | undefined, field: string, min: number, max: number): void {
  if (value !== undefined && !(Number.isInteger(value) && value >= min && value <= max)) {
    throw new InvalidInputError(`${field} must be a whole number from ${min} to ${max}, not ${value}`, field);
  }
}

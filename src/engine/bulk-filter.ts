import { InvalidInputError } from './errors.js';
import { checkPayloadMatch, checkTag } from './tags.js';
import { JOB_STATUSES, type JobStatus, type Json } from './types.js';

/**
 * Which jobs a bulk action reaches. Every field narrows (they combine with
 * AND); times are ISO-8601 strings or Dates, `...After` inclusive and
 * `...Before` exclusive. An empty filter matches every job, which a bulk
 * action refuses unless it says `all: true`.
 */
export interface BulkFilter {
  queue?: string;
  tenant?: string;
  type?: string;
  /** Any of these statuses (as jobs are listed: scheduled, queued, running, ...). */
  status?: JobStatus | readonly JobStatus[];
  createdAfter?: Date | string;
  createdBefore?: Date | string;
  /** Finished jobs only: a filter on the finish time matches no live job. */
  finishedAfter?: Date | string;
  finishedBefore?: Date | string;
  /** These jobs only (at most MAX_BULK_IDS): what a dashboard selected. */
  ids?: readonly string[];
  /** Jobs carrying every one of these tags. */
  tags?: readonly string[];
  /** Jobs whose payload contains this JSON object (jsonb `@>`). */
  payload?: { [key: string]: Json };
}

export const MAX_BULK_IDS = 1000;

/** What one batch statement did: the jobs it took (matched), those it changed, and the last id it took. */
export interface BatchOutcome {
  matched: number;
  changed: number;
  /** Of `changed`, the running jobs asked to stop (a cancel). */
  requested?: number;
  last_id: string | null;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const TIME_FIELDS = ['createdAfter', 'createdBefore', 'finishedAfter', 'finishedBefore'] as const;

/**
 * The filter as the one jsonb parameter ($1) of every bulk statement: a new
 * filter is a key here and a line in both MATCHES predicates below, and
 * every action and the dry run take it at once.
 * Refuses a field it cannot use by name, before the database is asked.
 */
export function filterParam(filter: BulkFilter): string {
  const statuses = filter.status === undefined ? undefined : [filter.status].flat();
  for (const status of statuses ?? []) {
    if (!JOB_STATUSES.includes(status)) {
      throw new InvalidInputError(`status must be one of ${JOB_STATUSES.join(', ')}, not "${status}"`, 'filter.status');
    }
  }
  if (statuses?.length === 0) throw new InvalidInputError('status must name at least one status', 'filter.status');
  const times: Record<string, string> = {};
  for (const field of TIME_FIELDS) {
    const value = filter[field];
    if (value === undefined) continue;
    const time = value instanceof Date ? value : new Date(value);
    if (Number.isNaN(time.getTime())) {
      throw new InvalidInputError(`${field} must be an ISO-8601 time, not "${String(value)}"`, `filter.${field}`);
    }
    times[field] = time.toISOString();
  }
  if (filter.ids !== undefined) {
    if (filter.ids.length === 0 || filter.ids.length > MAX_BULK_IDS) {
      throw new InvalidInputError(`ids must hold 1 to ${MAX_BULK_IDS} job ids`, 'filter.ids');
    }
    const bad = filter.ids.find((id) => !UUID.test(id));
    if (bad !== undefined) throw new InvalidInputError(`ids must be job ids (UUIDs), not "${bad}"`, 'filter.ids');
  }
  const tags = filter.tags?.map((tag, index) => checkTag(tag, `filter.tags.${index}`));
  if (tags?.length === 0) throw new InvalidInputError('tags must name at least one tag', 'filter.tags');
  const payload = filter.payload === undefined ? undefined : checkPayloadMatch(filter.payload, 'filter.payload');
  return JSON.stringify({
    queue: filter.queue,
    tenant: filter.tenant,
    type: filter.type,
    statuses,
    ...times,
    ids: filter.ids?.map((id) => id.toLowerCase()),
    tags,
    payload,
  });
}

/** True when the filter names nothing: every job of the caller's scope. */
export function isEmptyFilter(filter: BulkFilter): boolean {
  return Object.values(filter).every((value) => value === undefined);
}

/**
 * A live job (alias j) matching the filter $1. A status is the listed one
 * (skiplock.job_status), so `queued` means ready to start now. Finish times
 * match no live job.
 */
export const LIVE_MATCHES = /* sql */ `
  ($1::jsonb->>'queue' IS NULL OR j.queue = $1::jsonb->>'queue')
  AND ($1::jsonb->>'tenant' IS NULL OR j.tenant = $1::jsonb->>'tenant')
  AND ($1::jsonb->>'type' IS NULL OR j.type = $1::jsonb->>'type')
  AND ($1::jsonb->'statuses' IS NULL OR $1::jsonb->'statuses' ? skiplock.job_status(j.state, j.run_at))
  AND ($1::jsonb->>'createdAfter' IS NULL OR j.created_at >= ($1::jsonb->>'createdAfter')::timestamptz)
  AND ($1::jsonb->>'createdBefore' IS NULL OR j.created_at < ($1::jsonb->>'createdBefore')::timestamptz)
  AND $1::jsonb->>'finishedAfter' IS NULL AND $1::jsonb->>'finishedBefore' IS NULL
  AND ($1::jsonb->'ids' IS NULL OR $1::jsonb->'ids' ? j.id::text)
  AND ($1::jsonb->'tags' IS NULL OR EXISTS (
    SELECT 1 FROM skiplock.job_tags t
    WHERE t.job_id = j.id AND t.tags @> ARRAY(SELECT jsonb_array_elements_text($1::jsonb->'tags'))))
  AND ($1::jsonb->'payload' IS NULL OR j.payload @> ($1::jsonb->'payload'))`;

/** A finished job (alias f) matching the filter $1. */
export const FINISHED_MATCHES = /* sql */ `
  ($1::jsonb->>'queue' IS NULL OR f.queue = $1::jsonb->>'queue')
  AND ($1::jsonb->>'tenant' IS NULL OR f.tenant = $1::jsonb->>'tenant')
  AND ($1::jsonb->>'type' IS NULL OR f.type = $1::jsonb->>'type')
  AND ($1::jsonb->'statuses' IS NULL OR $1::jsonb->'statuses' ? f.state)
  AND ($1::jsonb->>'createdAfter' IS NULL OR f.created_at >= ($1::jsonb->>'createdAfter')::timestamptz)
  AND ($1::jsonb->>'createdBefore' IS NULL OR f.created_at < ($1::jsonb->>'createdBefore')::timestamptz)
  AND ($1::jsonb->>'finishedAfter' IS NULL OR f.finished_at >= ($1::jsonb->>'finishedAfter')::timestamptz)
  AND ($1::jsonb->>'finishedBefore' IS NULL OR f.finished_at < ($1::jsonb->>'finishedBefore')::timestamptz)
  AND ($1::jsonb->'ids' IS NULL OR $1::jsonb->'ids' ? f.id::text)
  AND ($1::jsonb->'tags' IS NULL OR f.tags @> ARRAY(SELECT jsonb_array_elements_text($1::jsonb->'tags')))
  AND ($1::jsonb->'payload' IS NULL OR f.payload @> ($1::jsonb->'payload'))`;

/** Where a bulk action resumes: after this job id, in id order. */
const CURSOR = /^bulk:([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$/;

/** The id before every job's: a first batch starts here. */
export const FIRST_ID = '00000000-0000-0000-0000-000000000000';

export function encodeBulkCursor(id: string): string {
  return btoa(`bulk:${id}`).replace(/=+$/, '');
}

export function decodeBulkCursor(cursor: string): string {
  let decoded: string;
  try {
    decoded = atob(cursor);
  } catch {
    throw new InvalidInputError('cursor is not one a bulk action answered', 'cursor');
  }
  const match = CURSOR.exec(decoded);
  if (!match) throw new InvalidInputError('cursor is not one a bulk action answered', 'cursor');
  return match[1]!;
}

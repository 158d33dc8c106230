import type { Queryable } from '../db/types.js';
import { InvalidInputError } from './errors.js';
import { toJob } from './job-json.js';
import { checkPayloadMatch, checkTag } from './tags.js';
import type { Job, JobEvent, JobStatus, Json } from './types.js';

/** Tenant scope of a read: a tenant-bound caller sees only its tenant's jobs. */
export interface TenantScope {
  tenant?: string;
}

/** Live or finished: all_jobs pushes the condition into both tables' id indexes. */
export const getJobSql = /* sql */ `
SELECT skiplock.job_json(a) AS job FROM skiplock.all_jobs a
WHERE a.id = $1 AND ($2::text IS NULL OR a.tenant = $2)`;

export async function getJob(db: Queryable, id: string, scope: TenantScope = {}): Promise<Job | undefined> {
  const [row] = await db.query<{ job: Job }>({
    name: 'skiplock_get_job',
    text: getJobSql,
    params: [id, scope.tenant ?? null],
  });
  return row && toJob(row.job);
}

export interface ListJobsOptions extends TenantScope {
  queue?: string;
  status?: JobStatus;
  type?: string;
  /** Jobs carrying every one of these tags. */
  tags?: readonly string[];
  /** Jobs whose payload contains this JSON object (jsonb `@>`): `{ customer: 42 }`. */
  payload?: { [key: string]: Json };
  /** Finished jobs whose last error holds this text (any case): its message, its name, anything in it. */
  error?: string;
  /** Opaque cursor from a previous page's `nextCursor`. */
  cursor?: string;
  /** Page size, 1..500, default 50. */
  limit?: number;
  /**
   * A page also ends once its jobs' JSON reaches about this many bytes (the
   * first job always comes, whatever its size), with a nextCursor for the
   * rest; no byte cap when left out.
   */
  maxBytes?: number;
}

export interface JobPage {
  jobs: Job[];
  /** Pass back as `cursor` for the next (older) page; null on the last page. */
  nextCursor: string | null;
}

/**
 * Newest first, keyset-paginated on the id (UUIDv7: creation order to the
 * millisecond), so pages stay stable while jobs arrive and both tables'
 * id indexes give the order. A status belongs to one table: the other
 * branch is switched off by its one-time condition instead of being
 * searched for rows that cannot match. The byte cap ($7) is applied around
 * the page: of the jobs the page would hold, those whose JSON starts past
 * the cap stay in the database (a payload, result, error and progress may
 * each be 256 KiB); `fetched` tells the caller that the cap, not the end of
 * the jobs, ended the page. Tags ($8, all of them) and a payload match ($9)
 * use the history's GIN indexes; the live table has none (they would slow
 * every claim), so its branch reads it newest first until the page is full
 * (a live job's tags by its key in skiplock.job_tags).
 * An error's text ($10) is searched in finished jobs only, so it switches
 * the live branch off.
 */
const listJobsSql = /* sql */ `
WITH page AS (
  (SELECT j.id, skiplock.job_json(j) AS job FROM skiplock.jobs j
   WHERE ($3::text IS NULL OR $3 IN ('scheduled', 'queued', 'retrying', 'running'))
     AND ($1::text IS NULL OR j.queue = $1)
     AND ($2::text IS NULL OR j.tenant = $2)
     AND ($3::text IS NULL OR skiplock.job_status(j.state, j.run_at) = $3)
     AND ($4::text IS NULL OR j.type = $4)
     AND ($5::uuid IS NULL OR j.id < $5)
     AND ($8::text[] IS NULL OR EXISTS (SELECT 1 FROM skiplock.job_tags t WHERE t.job_id = j.id AND t.tags @> $8))
     AND ($9::jsonb IS NULL OR j.payload @> $9)
     AND $10::text IS NULL
   ORDER BY j.id DESC
   LIMIT $6)
  UNION ALL
  (SELECT f.id, skiplock.job_json(f) AS job FROM skiplock.finished_jobs f
   WHERE ($3::text IS NULL OR $3 IN ('succeeded', 'failed', 'cancelled', 'expired'))
     AND ($1::text IS NULL OR f.queue = $1)
     AND ($2::text IS NULL OR f.tenant = $2)
     AND ($3::text IS NULL OR f.state = $3)
     AND ($4::text IS NULL OR f.type = $4)
     AND ($5::uuid IS NULL OR f.id < $5)
     AND ($8::text[] IS NULL OR f.tags @> $8)
     AND ($9::jsonb IS NULL OR f.payload @> $9)
     AND ($10::text IS NULL OR strpos(lower(f.last_error #>> '{}'), lower($10)) > 0)
   ORDER BY f.id DESC
   LIMIT $6)
  ORDER BY id DESC
  LIMIT $6
),
sized AS (
  SELECT id, job, count(*) OVER () AS fetched,
         sum(octet_length(job::text)) OVER (ORDER BY id DESC) - octet_length(job::text) AS bytes_before
  FROM page
)
SELECT id, job, fetched::integer AS fetched FROM sized
WHERE $7::bigint IS NULL OR bytes_before < $7
ORDER BY id DESC`;

export const MAX_PAGE = 500;

export async function listJobs(db: Queryable, options: ListJobsOptions = {}): Promise<JobPage> {
  const limit = options.limit ?? 50;
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_PAGE) {
    throw new InvalidInputError(`limit must be an integer from 1 to ${MAX_PAGE}`, 'limit');
  }
  const rows = await db.query<{ id: string; job: Job; fetched: number }>({
    name: 'skiplock_list_jobs',
    text: listJobsSql,
    params: [
      options.queue ?? null,
      options.tenant ?? null,
      options.status ?? null,
      options.type ?? null,
      options.cursor === undefined ? null : decodeCursor(options.cursor),
      limit + 1,
      options.maxBytes ?? null,
      options.tags === undefined || options.tags.length === 0
        ? null
        : options.tags.map((tag, index) => checkTag(tag, `tags.${index}`)),
      options.payload === undefined ? null : JSON.stringify(checkPayloadMatch(options.payload, 'payload')),
      errorText(options.error),
    ],
  });
  const page = rows.slice(0, limit);
  const cutByBytes = rows.length < (rows[0]?.fetched ?? 0);
  return {
    jobs: page.map((row) => toJob(row.job)),
    nextCursor: rows.length > limit || cutByBytes ? encodeCursor(page[page.length - 1]!.id) : null,
  };
}

/** The longest error text a list searches for. */
export const MAX_ERROR_SEARCH = 256;

function errorText(error: string | undefined): string | null {
  if (error === undefined) return null;
  if (typeof error !== 'string' || error.length < 1 || error.length > MAX_ERROR_SEARCH) {
    throw new InvalidInputError(`error must be a text of 1 to ${MAX_ERROR_SEARCH} characters`, 'error');
  }
  return error;
}

function encodeCursor(id: string): string {
  return btoa(`id:${id}`).replace(/=+$/, '');
}

const CURSOR = /^id:([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$/;

function decodeCursor(cursor: string): string {
  let decoded: string;
  try {
    decoded = atob(cursor);
  } catch {
    throw new InvalidInputError('cursor is not one this API issued', 'cursor');
  }
  const match = CURSOR.exec(decoded);
  if (!match) throw new InvalidInputError('cursor is not one this API issued', 'cursor');
  return match[1]!;
}

/**
 * A job's history, oldest first: the events stored for what its row cannot
 * say, and those its row says (enqueued, each attempt's claim, completed).
 * Every event that ends an attempt records when that attempt started, so
 * the claims of earlier attempts are read from them; the row's own started_at
 * is the last attempt's claim unless an event already ended that attempt.
 * A completion callback's delivery is a job of its own (callback_enqueued
 * names it): its failed attempts and its delivery are read from it.
 */
const jobEventsSql = /* sql */ `
WITH job AS (
  SELECT a.id, a.state, a.attempts, a.created_at, a.started_at, a.worker_id, a.finished_at
  FROM skiplock.all_jobs a
  WHERE a.id = $1 AND ($2::text IS NULL OR a.tenant = $2)
),
stored AS (
  SELECT e.id, e.at, e.kind, e.attempt, e.worker_id, e.detail,
         (e.detail->>'startedAt')::timestamptz AS attempt_started_at
  FROM skiplock.job_events e JOIN job ON e.job_id = job.id
),
callback AS (
  SELECT (s.detail->>'callbackJobId')::uuid AS id, s.attempt FROM stored s WHERE s.kind = 'callback_enqueued'
),
history AS (
  SELECT NULL::bigint AS id, job.created_at AS at, 'enqueued' AS kind, 0 AS attempt, NULL AS worker_id, NULL::jsonb AS detail
  FROM job
  UNION ALL
  SELECT NULL, s.attempt_started_at, 'claimed', s.attempt, s.worker_id, NULL
  FROM stored s WHERE s.attempt_started_at IS NOT NULL
  UNION ALL
  SELECT NULL, job.started_at, 'claimed', job.attempts, job.worker_id, NULL
  FROM job
  WHERE job.started_at IS NOT NULL
    AND NOT EXISTS (SELECT 1 FROM stored s WHERE s.attempt_started_at = job.started_at)
  UNION ALL
  SELECT s.id, s.at, s.kind, s.attempt, s.worker_id, s.detail FROM stored s
  UNION ALL
  SELECT NULL, job.finished_at, 'completed', job.attempts, job.worker_id, NULL
  FROM job WHERE job.state = 'succeeded'
  UNION ALL
  SELECT e.id, e.at, CASE e.kind WHEN 'cancelled' THEN 'callback_cancelled' ELSE 'callback_failed' END, c.attempt,
         e.worker_id, jsonb_build_object('callbackJobId', c.id, 'deliveryAttempt', e.attempt) || coalesce(e.detail, '{}')
  FROM callback c JOIN skiplock.job_events e ON e.job_id = c.id
  WHERE e.kind IN ('failed', 'lease_expired', 'cancelled')
  UNION ALL
  SELECT NULL, f.finished_at, 'callback_delivered', c.attempt, f.worker_id,
         jsonb_build_object('callbackJobId', c.id, 'deliveryAttempt', f.attempts, 'status', f.result->'status')
  FROM callback c JOIN skiplock.finished_jobs f ON f.id = c.id
  WHERE f.state = 'succeeded'
)
SELECT h.id::integer AS id, $1::uuid AS "jobId", skiplock.iso(h.at) AS at, h.kind, h.attempt,
       h.worker_id AS "workerId", h.detail
FROM history h
ORDER BY h.at, h.id NULLS FIRST`;

/** A job's history, oldest first; empty when there is no such job (in the caller's tenant). */
export async function getJobEvents(db: Queryable, id: string, scope: TenantScope = {}): Promise<JobEvent[]> {
  return db.query<JobEvent>({
    name: 'skiplock_job_events',
    text: jobEventsSql,
    params: [id, scope.tenant ?? null],
  });
}

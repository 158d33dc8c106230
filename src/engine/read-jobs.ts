import type { Queryable } from '../db/types.js';
import { InvalidInputError } from './errors.js';
import { toJob } from './job-json.js';
import type { Job, JobEvent, JobStatus } from './types.js';

/** Tenant scope of a read: a tenant-bound caller sees only its tenant's jobs. */
export interface TenantScope {
  tenant?: string;
}

const getJobSql = /* sql */ `
SELECT skiplock.job_json(j) AS job FROM skiplock.jobs j
WHERE j.id = $1 AND ($2::text IS NULL OR j.tenant = $2)`;

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
 * Newest first, keyset-paginated on enqueue order, so pages stay stable while
 * jobs arrive. The byte cap ($7) is applied around the page: of the jobs the
 * page would hold, those whose JSON starts past the cap stay in the database
 * (a payload, result, error and progress may each be 256 KiB); `fetched`
 * tells the caller that the cap, not the end of the jobs, ended the page.
 */
const listJobsSql = /* sql */ `
WITH page AS (
  SELECT j.seq, skiplock.job_json(j) AS job FROM skiplock.jobs j
  WHERE ($1::text IS NULL OR j.queue = $1)
    AND ($2::text IS NULL OR j.tenant = $2)
    AND ($3::text IS NULL OR skiplock.job_status(j.state, j.run_at) = $3)
    AND ($4::text IS NULL OR j.type = $4)
    AND ($5::bigint IS NULL OR j.seq < $5)
  ORDER BY j.seq DESC
  LIMIT $6
), sized AS (
  SELECT seq, job, count(*) OVER () AS fetched,
         sum(octet_length(job::text)) OVER (ORDER BY seq DESC) - octet_length(job::text) AS bytes_before
  FROM page
)
SELECT seq::text AS seq, job, fetched::integer AS fetched FROM sized
WHERE $7::bigint IS NULL OR bytes_before < $7
ORDER BY seq DESC`;

export const MAX_PAGE = 500;

export async function listJobs(db: Queryable, options: ListJobsOptions = {}): Promise<JobPage> {
  const limit = options.limit ?? 50;
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_PAGE) {
    throw new InvalidInputError(`limit must be an integer from 1 to ${MAX_PAGE}`, 'limit');
  }
  const rows = await db.query<{ seq: string; job: Job; fetched: number }>({
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
    ],
  });
  const page = rows.slice(0, limit);
  const cutByBytes = rows.length < (rows[0]?.fetched ?? 0);
  return {
    jobs: page.map((row) => toJob(row.job)),
    nextCursor: rows.length > limit || cutByBytes ? encodeCursor(page[page.length - 1]!.seq) : null,
  };
}

const MAX_BIGINT = 2n ** 63n - 1n;

function encodeCursor(seq: string): string {
  return btoa(`seq:${seq}`).replace(/=+$/, '');
}

function decodeCursor(cursor: string): string {
  let decoded: string;
  try {
    decoded = atob(cursor);
  } catch {
    throw new InvalidInputError('cursor is not one this API issued', 'cursor');
  }
  const match = /^seq:(\d{1,19})$/.exec(decoded);
  // A bigint holds at most 2^63 - 1: a larger number was never issued, and Postgres would refuse it.
  if (!match || BigInt(match[1]!) > MAX_BIGINT) throw new InvalidInputError('cursor is not one this API issued', 'cursor');
  return match[1]!;
}

const jobEventsSql = /* sql */ `
SELECT e.id::integer AS id, e.job_id AS "jobId", skiplock.iso(e.at) AS at, e.kind, e.attempt,
       e.worker_id AS "workerId", e.detail
FROM skiplock.job_events e
WHERE e.job_id = $1
  AND ($2::text IS NULL OR EXISTS (SELECT 1 FROM skiplock.jobs j WHERE j.id = $1 AND j.tenant = $2))
ORDER BY e.id`;

/** A job's history, oldest first. */
export async function getJobEvents(db: Queryable, id: string, scope: TenantScope = {}): Promise<JobEvent[]> {
  return db.query<JobEvent>({
    name: 'skiplock_job_events',
    text: jobEventsSql,
    params: [id, scope.tenant ?? null],
  });
}

import type { Queryable } from '../db/types.js';
import { type ApiKey, type ApiKeyScope, apiKeyColumns } from './api-keys.js';
import {
  type EnqueueInput,
  type EnqueueResult,
  type EnqueueRow,
  enqueueJobsJson,
  enqueueRefusal,
  enqueueResults,
  isTraced,
  KEEP_TRACE_CONTEXTS,
  QUEUE_DROPS,
} from './enqueue.js';

/** The API key an enqueue is made with, and the scopes of which it needs one. */
export interface EnqueuingKey {
  /** Lowercase hex SHA-256 of the presented secret. */
  secretSha256: string;
  scopes: readonly ApiKeyScope[];
}

export interface ApiKeyEnqueue {
  /** The unrevoked key of that secret; undefined when there is none, and nothing was enqueued. */
  apiKey: ApiKey | undefined;
  /** The jobs' results in input order; undefined when the key may not enqueue them, and nothing was enqueued. */
  results: EnqueueResult[] | undefined;
}

/**
 * The key's check and the enqueue in one statement. The unrevoked key of the
 * secret's hash is `allowed` when it holds one of the scopes ($3) and, bound to
 * a tenant, no job names another tenant. The jobs reach skiplock.enqueue_jobs
 * only through an allowed key's row, each with its tenant: the key's, else the
 * one it names, else 'default'. Without such a row the function is never
 * called, so nothing is enqueued. The key's row comes back with every job's
 * (or alone, when refused), and no row at all when there is no such key.
 */
function enqueueWithApiKeySql(traced: boolean): string {
  return /* sql */ `
WITH api_key AS MATERIALIZED (
  SELECT ${apiKeyColumns},
    scopes && $3::text[]
      AND (tenant IS NULL OR NOT EXISTS (
        SELECT FROM jsonb_array_elements($1::jsonb) AS j(job)
        WHERE j.job ? 'tenant' AND j.job->>'tenant' IS DISTINCT FROM tenant
      )) AS allowed
  FROM skiplock.api_keys
  WHERE secret_sha256 = $2 AND revoked_at IS NULL
),
allowed_jobs AS MATERIALIZED (
  SELECT (
    SELECT jsonb_agg(j.job || jsonb_build_object('tenant', coalesce(k.tenant, j.job->>'tenant', 'default'))
                     ORDER BY j.ordinal)
    FROM jsonb_array_elements($1::jsonb) WITH ORDINALITY AS j(job, ordinal)
  ) AS jobs
  FROM api_key k
  WHERE k.allowed
),
enqueued AS MATERIALIZED (
  SELECT e.* FROM allowed_jobs a CROSS JOIN LATERAL skiplock.enqueue_jobs(a.jobs) WITH ORDINALITY AS e
)${traced ? `,${KEEP_TRACE_CONTEXTS}` : ''}
SELECT to_jsonb(k) - 'allowed' AS "apiKey", e.*, coalesce(${QUEUE_DROPS}, false) AS "queueDrops"
FROM api_key k
LEFT JOIN enqueued e ON true
ORDER BY e.ordinality`;
}

const enqueueWithApiKey = enqueueWithApiKeySql(false);
const tracedEnqueueWithApiKey = enqueueWithApiKeySql(true);

/** A job's row, with its position (null on the row of a refused key) and the key's row. */
type ApiKeyEnqueueRow = EnqueueRow & { ordinality: number | null; apiKey: ApiKey };

/**
 * Enqueues up to 1,000 jobs made with an API key, checking the key in the
 * same statement: over Neon's HTTP driver one round trip, where looking the
 * key up and then enqueueing take two. The key is read in the statement's
 * snapshot, so a key revoked before it began enqueues nothing. A job that
 * names no tenant gets the key's tenant, or 'default' from a key of every
 * tenant; a key bound to a tenant enqueues nothing when a job names another.
 */
export async function enqueueBatchWithApiKey(
  db: Queryable,
  key: EnqueuingKey,
  jobs: readonly EnqueueInput[],
): Promise<ApiKeyEnqueue> {
  const traced = isTraced(jobs);
  const rows = await db
    .query<ApiKeyEnqueueRow>({
      name: traced ? 'skiplock_enqueue_traced_with_api_key' : 'skiplock_enqueue_with_api_key',
      text: traced ? tracedEnqueueWithApiKey : enqueueWithApiKey,
      params: [enqueueJobsJson(jobs), key.secretSha256, key.scopes],
    })
    .catch((error: unknown) => {
      throw enqueueRefusal(error);
    });
  const apiKey = rows[0]?.apiKey;
  // A refused key's row comes back alone, with no job's columns.
  if (apiKey === undefined || rows[0]!.ordinality === null) return { apiKey, results: undefined };
  return { apiKey, results: await enqueueResults(db, jobs, rows) };
}

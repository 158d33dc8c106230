import type { Context } from 'hono';
import { getJob, type Job } from '../engine/index.js';
import { hasScope, tenantScope, type KeyHolder } from './auth/principal.js';
import type { AppDeps, AppEnv } from './context.js';
import type { ChangedJobSchema } from './schemas/job.js';
import { statusViewOf, type JobStatusView } from './status-view.js';
import type { z } from '@hono/zod-openapi';

/**
 * Reads job `id` as this request's caller may see it: a key holder the whole
 * job (within its tenant), a status token only the job's status view.
 * Undefined when there is no such job, or none the caller may see.
 */
export function jobReader(
  deps: AppDeps,
  c: Context<AppEnv>,
  id: string,
): () => Promise<Job | JobStatusView | undefined> {
  const database = deps.database(c.env);
  const principal = c.var.principal;
  if (principal.kind === 'status-token') {
    return async () => {
      const job = await getJob(database, id);
      return job && statusViewOf(job, deps.jobType?.(c.env, job.type));
    };
  }
  const scope = tenantScope(principal);
  return () => getJob(database, id, scope);
}

/**
 * A job that a route changed for a key holder (cancel, retry, reschedule), as
 * that key may see it: whole with the `read` scope, else by id and status
 * only. Changing a job is the `enqueue` scope's, reading it the `read`
 * scope's: a key that learned a job's id must not read it by changing it.
 */
export function changedJobFor(holder: KeyHolder, job: Job): z.output<typeof ChangedJobSchema> {
  return hasScope(holder, ['read']) ? job : { id: job.id, status: job.status };
}

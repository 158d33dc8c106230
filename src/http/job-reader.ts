import type { Context } from 'hono';
import { getJob, getJobSteps, type Job } from '../engine/index.js';
import { hasScope, tenantScope, type KeyHolder } from './auth/principal.js';
import type { AppDeps, AppEnv, Bindings } from './context.js';
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
  if (principal.kind === 'status-token') return () => readStatusView(deps, c.env, id);
  const scope = tenantScope(principal);
  return () => getJob(database, id, scope);
}

/** Job `id` as its status token shows it (the status page's and the API's). */
export async function readStatusView(deps: AppDeps, env: Bindings, id: string): Promise<JobStatusView | undefined> {
  const database = deps.database(env);
  const job = await getJob(database, id);
  if (job === undefined) return undefined;
  // Only a scheduled job can be parked: the others cost no second statement.
  const waits = job.status === 'scheduled' ? ((await getJobSteps(database, id))?.waitingFor ?? []) : [];
  return statusViewOf(job, deps.jobType?.(env, job.type), waits);
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

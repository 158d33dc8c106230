import type { Context } from 'hono';
import { getJob, type Job } from '../engine/index.js';
import { tenantScope } from './auth/principal.js';
import type { AppDeps, AppEnv } from './context.js';
import { statusViewOf, type JobStatusView } from './status-view.js';

/**
 * Reads job `id` as this request's caller may see it: a key holder the whole
 * job (within its tenant), a status token only the job's status view.
 * Undefined when there is no such job, or none the caller may see.
 */
export function jobReader(deps: AppDeps, c: Context<AppEnv>, id: string): () => Promise<Job | JobStatusView | undefined> {
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

import type { Queryable } from '../db/types.js';
import { checkBatch, type EnqueueInput, JOB_KEY_FIELDS, type JobKeys, MAX_BATCH } from './enqueue.js';
import { InvalidInputError } from './errors.js';
import { toJob } from './job-json.js';
import type { Job } from './types.js';

/** What a dependent does when a job it depends on ends other than succeeded. */
export type OnDependencyFailure = 'fail' | 'run';

export interface FlowJob extends Omit<EnqueueInput, 'tenant' | 'dedupKey' | 'dedupWindowSeconds' | keyof JobKeys> {
  /** The job's name within the flow, as other jobs' `dependsOn` name it. */
  ref: string;
  /**
   * The jobs of the flow it waits for: it becomes claimable once all have
   * ended, and fails at once when one fails whose `onFailure` is `fail`
   * (the default); with `run` it runs anyway and sees the failure in
   * `ctx.dependencies()`.
   */
  dependsOn?: readonly FlowDependency[];
}

export type FlowDependency = string | { ref: string; onFailure?: OnDependencyFailure };

export interface FlowInput {
  /** Every job of the flow belongs to this tenant. Default `default`. */
  tenant?: string;
  jobs: readonly FlowJob[];
}

interface Edge {
  job: number;
  dependsOn: number;
  onFailure: OnDependencyFailure;
}

/** One statement: skiplock.enqueue_flow in migrations/0004_durable_steps.sql. */
const enqueueFlowSql = /* sql */ `SELECT skiplock.enqueue_flow($1::jsonb, $2::jsonb) AS job`;

/**
 * The same, for a flow with trace contexts: each job's goes in
 * skiplock.job_trace_contexts in the same statement, as a traced enqueue's
 * does. The function answers the jobs in input order (their ids are made in
 * that order), which ORDINALITY numbers.
 */
const tracedEnqueueFlowSql = /* sql */ `
WITH flow AS MATERIALIZED (
  SELECT f.job, f.ordinality FROM skiplock.enqueue_flow($1::jsonb, $2::jsonb) WITH ORDINALITY AS f(job, ordinality)
),
traced AS (
  INSERT INTO skiplock.job_trace_contexts (job_id, traceparent, tracestate)
  SELECT (f.job->>'id')::uuid, i.job->>'traceparent', i.job->>'tracestate'
  FROM flow f
  JOIN jsonb_array_elements($1::jsonb) WITH ORDINALITY AS i(job, ordinal) ON i.ordinal = f.ordinality
  WHERE i.job ? 'traceparent'
)
SELECT job FROM flow ORDER BY ordinality`;

/**
 * Enqueues a graph of jobs in one statement, all or none: each job waits
 * (parked, holding nothing) until the jobs it depends on have ended.
 * Refuses a cycle by naming it, and a dependency on a job not in the flow.
 * Answers the jobs in input order.
 */
export async function enqueueFlow(db: Queryable, flow: FlowInput): Promise<Job[]> {
  const { jobs, edges } = checkFlow(flow);
  const traced = jobs.some((job) => job.traceparent !== undefined);
  const rows = await db.query<{ job: Job }>({
    name: traced ? 'skiplock_enqueue_flow_traced' : 'skiplock_enqueue_flow',
    text: traced ? tracedEnqueueFlowSql : enqueueFlowSql,
    params: [JSON.stringify(jobs), JSON.stringify(edges)],
  });
  return rows.map((row) => toJob(row.job));
}

function checkFlow(flow: FlowInput): { jobs: EnqueueInput[]; edges: Edge[] } {
  if (!Array.isArray(flow.jobs) || flow.jobs.length === 0)
    throw new InvalidInputError('a flow needs at least one job', 'jobs');
  if (flow.jobs.length > MAX_BATCH) throw new InvalidInputError(`a flow holds at most ${MAX_BATCH} jobs`, 'jobs');
  const index = new Map<string, number>();
  flow.jobs.forEach((job, position) => {
    if (typeof job.ref !== 'string' || job.ref.length < 1 || job.ref.length > 128) {
      throw new InvalidInputError('ref must be 1 to 128 characters', `jobs.${position}.ref`);
    }
    if (index.has(job.ref)) throw new InvalidInputError(`ref "${job.ref}" names two jobs`, `jobs.${position}.ref`);
    const extra = job as Partial<EnqueueInput>;
    for (const field of ['tenant', 'dedupKey', 'dedupWindowSeconds'] as const) {
      if (extra[field] !== undefined) {
        throw new InvalidInputError(
          `a flow's job takes no ${field} (the flow's tenant is its own)`,
          `jobs.${position}.${field}`,
        );
      }
    }
    // A flow parks its dependents from the start, which a job held for its key's turn cannot be.
    for (const field of JOB_KEY_FIELDS) {
      if (extra[field] !== undefined) {
        throw new InvalidInputError(`a flow's job takes no ${field}`, `jobs.${position}.${field}`);
      }
    }
    index.set(job.ref, position);
  });
  const edges: Edge[] = [];
  flow.jobs.forEach((job, position) => {
    (job.dependsOn ?? []).forEach((dependency: FlowDependency, at: number) => {
      const ref = typeof dependency === 'string' ? dependency : dependency.ref;
      const onFailure = typeof dependency === 'string' ? 'fail' : (dependency.onFailure ?? 'fail');
      const field = `jobs.${position}.dependsOn.${at}`;
      const target = index.get(ref);
      if (target === undefined)
        throw new InvalidInputError(`depends on "${ref}", which is not a job of the flow`, field);
      if (onFailure !== 'fail' && onFailure !== 'run')
        throw new InvalidInputError('onFailure must be fail or run', field);
      if (edges.some((edge) => edge.job === position && edge.dependsOn === target)) {
        throw new InvalidInputError(`depends on "${ref}" twice`, field);
      }
      edges.push({ job: position, dependsOn: target, onFailure });
    });
  });
  const cycle = findCycle(flow.jobs.length, edges);
  if (cycle !== undefined) {
    const names = cycle.map((position) => flow.jobs[position]!.ref);
    throw new InvalidInputError(`the flow has a cycle: ${names.join(' -> ')}`, 'jobs');
  }
  const tenant = flow.tenant ?? 'default';
  const jobs = flow.jobs.map(({ ref: _ref, dependsOn: _dependsOn, ...job }) => ({ ...job, tenant }));
  checkBatch(jobs);
  return { jobs, edges };
}

/** A cycle among the edges (its jobs, the first repeated at the end), if there is one. */
function findCycle(size: number, edges: readonly Edge[]): number[] | undefined {
  const next = Array.from({ length: size }, () => [] as number[]);
  for (const edge of edges) next[edge.job]!.push(edge.dependsOn);
  const state = new Array<0 | 1 | 2>(size).fill(0);
  const path: number[] = [];
  const visit = (node: number): number[] | undefined => {
    state[node] = 1;
    path.push(node);
    for (const other of next[node]!) {
      if (state[other] === 1) return [...path.slice(path.indexOf(other)), other];
      if (state[other] === 0) {
        const found = visit(other);
        if (found !== undefined) return found;
      }
    }
    path.pop();
    state[node] = 2;
    return undefined;
  };
  for (let node = 0; node < size; node++) {
    if (state[node] === 0) {
      const found = visit(node);
      if (found !== undefined) return found;
    }
  }
  return undefined;
}

/** What a job's dependencies ended as, for `ctx.dependencies()`. */
export interface DependencyEnd {
  jobId: string;
  type: string;
  status: string;
  result: unknown;
  lastError: unknown;
}

const dependencyEndsSql = /* sql */ `
SELECT l.other_id AS "jobId", f.type, f.state AS status, f.result, f.last_error AS "lastError"
FROM skiplock.job_links l
JOIN skiplock.finished_jobs f ON f.id = l.other_id
WHERE l.job_id = $1 AND l.kind = 'dependency'
ORDER BY l.other_id`;

/** The ends of a job's dependencies, in the flow's order. */
export function dependencyEnds(db: Queryable, jobId: string): Promise<DependencyEnd[]> {
  return db.query<DependencyEnd>({ name: 'skiplock_dependency_ends', text: dependencyEndsSql, params: [jobId] });
}

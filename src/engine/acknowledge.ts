import type { Queryable } from '../db/types.js';
import { completeMany, type Completion } from './complete.js';
import { InvalidInputError } from './errors.js';
import { failMany, type Failure, type FailOutcome } from './fail.js';
import { releaseMany, type ReleaseOptions } from './release.js';
import type { Lease } from './types.js';

/** The most jobs one acknowledgement may carry. */
export const MAX_ACKNOWLEDGEMENTS = 1000;

/** What a worker reports about the jobs it claimed: each with its lease token. */
export interface Acknowledgements {
  complete?: readonly Completion[];
  fail?: readonly Failure[];
  release?: ReadonlyArray<Lease & ReleaseOptions>;
}

export interface AcknowledgeResult {
  completed: string[];
  failed: Array<{ id: string; outcome: FailOutcome }>;
  released: string[];
  /** Ids whose token no longer owned the job (or, for a tenant-bound caller, of another tenant's job): unchanged. */
  stale: string[];
}

/** The live jobs among `ids` that belong to the tenant. */
const jobsOfTenantSql = /* sql */ `SELECT id FROM skiplock.jobs WHERE id = ANY($1::uuid[]) AND tenant = $2`;

/**
 * Completes, fails and hands back many claimed jobs: one statement for the
 * completions, one for the failures, one per distinct release option. Each
 * job is fenced by its own token, so a stale one is reported and never
 * holds up the others. `tenant` confines a tenant-bound caller to its jobs.
 */
export async function acknowledge(
  db: Queryable,
  acknowledgements: Acknowledgements,
  scope: { tenant?: string } = {},
): Promise<AcknowledgeResult> {
  const { complete = [], fail = [], release = [] } = acknowledgements;
  checkAcknowledgements(complete, fail, release);
  const all = [...complete, ...fail, ...release];
  const own = scope.tenant === undefined ? undefined : await jobsOfTenant(db, all, scope.tenant);
  const mine = (lease: Lease) => own === undefined || own.has(lease.id);
  const result: AcknowledgeResult = {
    completed: [],
    failed: [],
    released: [],
    stale: all.filter((lease) => !mine(lease)).map((lease) => lease.id),
  };

  const completed = await completeMany(db, complete.filter(mine));
  result.completed.push(...completed.completed);
  result.stale.push(...completed.stale);

  const failed = await failMany(db, fail.filter(mine));
  result.failed.push(...failed.failed);
  result.stale.push(...failed.stale);

  for (const [options, leases] of groupByOptions(release.filter(mine))) {
    const released = await releaseMany(db, leases, options);
    result.released.push(...released.released);
    result.stale.push(...released.stale);
  }
  return result;
}

async function jobsOfTenant(db: Queryable, leases: readonly Lease[], tenant: string): Promise<Set<string>> {
  const ids = leases.map((lease) => lease.id);
  const rows = await db.query<{ id: string }>({
    name: 'skiplock_jobs_of_tenant',
    text: jobsOfTenantSql,
    params: [ids, tenant],
  });
  return new Set(rows.map((row) => row.id));
}

function checkAcknowledgements(...lists: ReadonlyArray<readonly Lease[]>): void {
  const [complete, fail, release] = lists;
  const total = lists.reduce((sum, list) => sum + list.length, 0);
  if (total === 0) throw new InvalidInputError('acknowledge at least one job', 'complete');
  if (total > MAX_ACKNOWLEDGEMENTS) {
    throw new InvalidInputError(`one acknowledgement carries at most ${MAX_ACKNOWLEDGEMENTS} jobs`, 'complete');
  }
  const seen = new Set<string>();
  for (const [name, list] of [
    ['complete', complete!],
    ['fail', fail!],
    ['release', release!],
  ] as const) {
    list.forEach((lease, index) => {
      if (seen.has(lease.id))
        throw new InvalidInputError(`job ${lease.id} is acknowledged twice`, `${name}.${index}.id`);
      seen.add(lease.id);
    });
  }
}

/** Releases with the same options share a statement. */
function groupByOptions(releases: ReadonlyArray<Lease & ReleaseOptions>): Map<ReleaseOptions, Lease[]> {
  const groups = new Map<string, [ReleaseOptions, Lease[]]>();
  for (const { id, leaseToken, delaySeconds, countAttempt } of releases) {
    const key = JSON.stringify([delaySeconds ?? 0, countAttempt ?? false]);
    const group = groups.get(key) ?? [{ delaySeconds, countAttempt }, []];
    group[1].push({ id, leaseToken });
    groups.set(key, group);
  }
  return new Map(groups.values());
}

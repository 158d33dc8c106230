import type { Queryable } from '../db/types.js';

export interface RateLimit {
  /** Jobs that may start per window... */
  count: number;
  /** ...of this many seconds. */
  perSeconds: number;
}

export interface TenantSettings {
  /** Running jobs at once; null for no limit. */
  concurrency: number | null;
  rateLimit: RateLimit | null;
  /** Share of turns when tenants compete, 1..1000. */
  weight: number;
}

export interface Tenant extends TenantSettings {
  name: string;
  /** False when the tenant runs on the defaults. */
  custom: boolean;
  running: number;
}

const getTenantSql = /* sql */ `
SELECT name, concurrency, rate_count, rate_per_seconds, weight, custom,
       (SELECT count(*)::integer FROM skiplock.jobs r WHERE r.tenant = $1 AND r.state = 'running') AS running
FROM (
  SELECT name, concurrency, rate_count, rate_per_seconds, weight, custom
  FROM skiplock.tenant_limits WHERE name = $1
  UNION ALL
  SELECT $1, concurrency, rate_count, rate_per_seconds, weight, false
  FROM skiplock.tenant_defaults WHERE NOT EXISTS (SELECT 1 FROM skiplock.tenants WHERE name = $1)
) effective`;

const setTenantSql = /* sql */ `
INSERT INTO skiplock.tenants AS t (name, has_settings, concurrency, rate_count, rate_per_seconds, weight, updated_at)
VALUES ($1, true, $2, $3, $4, $5, now())
ON CONFLICT (name) DO UPDATE
SET has_settings = true, concurrency = $2, rate_count = $3, rate_per_seconds = $4, weight = $5, updated_at = now()`;

const setTenantDefaultsSql = /* sql */ `
UPDATE skiplock.tenant_defaults SET concurrency = $1, rate_count = $2, rate_per_seconds = $3, weight = $4`;

interface TenantRow {
  name: string;
  concurrency: number | null;
  rate_count: number | null;
  rate_per_seconds: number | null;
  weight: number;
  custom: boolean;
  running: number;
}

/** A tenant's effective settings (its own, or the defaults) and its running count. */
export async function getTenant(db: Queryable, name: string): Promise<Tenant> {
  const [row] = await db.query<TenantRow>({
    name: 'skiplock_get_tenant',
    text: getTenantSql,
    params: [name],
  });
  return toTenant(row!);
}

export async function setTenant(db: Queryable, name: string, settings: TenantSettings): Promise<Tenant> {
  await db.query({
    name: 'skiplock_set_tenant',
    text: setTenantSql,
    params: [name, ...settingsParams(settings)],
  });
  return getTenant(db, name);
}

/** Settings for every tenant that has none of its own. */
export async function setTenantDefaults(db: Queryable, settings: TenantSettings): Promise<void> {
  await db.query({
    name: 'skiplock_set_tenant_defaults',
    text: setTenantDefaultsSql,
    params: settingsParams(settings),
  });
}

function settingsParams(settings: TenantSettings): unknown[] {
  return [
    settings.concurrency,
    settings.rateLimit?.count ?? null,
    settings.rateLimit?.perSeconds ?? null,
    settings.weight,
  ];
}

function toTenant(row: TenantRow): Tenant {
  return {
    name: row.name,
    concurrency: row.concurrency,
    rateLimit:
      row.rate_count === null || row.rate_per_seconds === null
        ? null
        : { count: row.rate_count, perSeconds: row.rate_per_seconds },
    weight: row.weight,
    custom: row.custom,
    running: row.running,
  };
}

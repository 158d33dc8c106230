/**
 * What a workload costs the database: statements (pg_stat_statements where
 * the server has it, else client round trips counted in `pg`), WAL bytes,
 * and the size and dead tuples of a system's tables. The harness's own
 * queries carry the PROBE comment and are left out of every count.
 */
import pg from 'pg';
import type { BenchDatabase } from './postgres';

const PROBE = '/* bench-probe */';
const thisDatabase = `(SELECT oid FROM pg_database WHERE datname = current_database())`;

export interface StatementCount {
  query: string;
  calls: number;
  totalMs: number;
}

export interface StatementCounter {
  /** Where the counts come from. */
  readonly source: 'pg_stat_statements' | 'client round trips';
  /** Starts a new count (and forgets the last). */
  reset(): Promise<void>;
  /** Statements run in this database since the reset, most called first. */
  read(): Promise<StatementCount[]>;
}

/**
 * pg_stat_statements when it works in `db`; otherwise every `query` call of
 * every pg client in this process (all three libraries use `pg`), which is
 * one round trip each.
 */
export function statementCounter(db: BenchDatabase): StatementCounter {
  return db.statementStats ? serverCounter(db) : clientCounter();
}

function serverCounter(db: BenchDatabase): StatementCounter {
  return {
    source: 'pg_stat_statements',
    async reset() {
      await db.probe.query(`${PROBE} SELECT pg_stat_statements_reset(0, ${thisDatabase}, 0)`);
    },
    async read() {
      const { rows } = await db.probe.query<{ query: string; calls: string; total_ms: number }>(
        `${PROBE} SELECT query, calls, total_exec_time AS total_ms FROM pg_stat_statements
         WHERE dbid = ${thisDatabase} AND query NOT LIKE '%bench-probe%' ORDER BY calls DESC`,
      );
      return rows.map((row) => ({ query: row.query, calls: Number(row.calls), totalMs: row.total_ms }));
    },
  };
}

interface CountingPrototype {
  query: (...args: unknown[]) => unknown;
}

function clientCounter(): StatementCounter {
  const prototype = pg.Client.prototype as unknown as CountingPrototype;
  const original = prototype.query;
  const counts = new Map<string, number>();
  let installed = false;
  return {
    source: 'client round trips',
    async reset() {
      counts.clear();
      if (installed) return;
      installed = true;
      prototype.query = function (this: unknown, ...args: unknown[]) {
        const first = args[0];
        const text =
          typeof first === 'string'
            ? first
            : typeof first === 'object' && first !== null && 'text' in first
              ? String(first.text)
              : '?';
        if (!text.includes('bench-probe')) counts.set(text, (counts.get(text) ?? 0) + 1);
        return original.apply(this, args);
      };
    },
    async read() {
      return [...counts]
        .map(([query, calls]) => ({ query, calls, totalMs: Number.NaN }))
        .sort((a, b) => b.calls - a.calls);
    },
  };
}

/** Server-side time and WAL of the statements whose text contains `marker` since the last reset. */
export async function statementTime(
  db: BenchDatabase,
  marker: string,
): Promise<{ calls: number; meanMs: number; maxMs: number; walBytes: number } | undefined> {
  if (!db.statementStats) return undefined;
  const { rows } = await db.probe.query<{
    calls: string | null;
    mean_ms: number | null;
    max_ms: number | null;
    wal_bytes: string | null;
  }>(
    `${PROBE} SELECT sum(calls) AS calls, sum(total_exec_time) / nullif(sum(calls), 0) AS mean_ms, max(max_exec_time) AS max_ms,
            sum(wal_bytes) AS wal_bytes
     FROM pg_stat_statements WHERE dbid = ${thisDatabase} AND strpos(query, $1) > 0`,
    [marker],
  );
  const row = rows[0];
  if (row?.calls == null || row.mean_ms === null || row.max_ms === null) return undefined;
  return { calls: Number(row.calls), meanMs: row.mean_ms, maxMs: row.max_ms, walBytes: Number(row.wal_bytes) };
}

/** The server's current WAL position; WAL written between two positions is their difference. */
export async function walPosition(db: BenchDatabase): Promise<string> {
  const { rows } = await db.probe.query<{ lsn: string }>(`${PROBE} SELECT pg_current_wal_lsn()::text AS lsn`);
  return rows[0]!.lsn;
}

export async function walBytesSince(db: BenchDatabase, from: string): Promise<number> {
  const { rows } = await db.probe.query<{ bytes: string }>(
    `${PROBE} SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1)::bigint AS bytes`,
    [from],
  );
  return Number(rows[0]!.bytes);
}

export interface TableFootprint {
  /** Tables plus their indexes and TOAST, in bytes. */
  bytes: number;
  liveTuples: number;
  deadTuples: number;
}

/**
 * The tables of `schema` after a run. Statistics reach the server when a
 * backend goes idle or exits, so call this after the system's connections
 * have closed.
 */
export async function tableFootprint(db: BenchDatabase, schema: string): Promise<TableFootprint> {
  const { rows } = await db.probe.query<{ bytes: string; live: string; dead: string }>(
    `${PROBE} SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) AS bytes,
            coalesce(sum(s.n_live_tup), 0) AS live, coalesce(sum(s.n_dead_tup), 0) AS dead
     FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid
     WHERE n.nspname = $1 AND c.relkind IN ('r', 'm')`,
    [schema],
  );
  const row = rows[0]!;
  return { bytes: Number(row.bytes), liveTuples: Number(row.live), deadTuples: Number(row.dead) };
}

export interface RelationSize {
  /** A table (with its TOAST) or an index of the schema. */
  relation: string;
  bytes: number;
}

/** Each table (with its TOAST) and index of `schema`, largest first: where a footprint's bytes are. */
export async function relationSizes(db: BenchDatabase, schema: string): Promise<RelationSize[]> {
  const { rows } = await db.probe.query<{ relation: string; bytes: string }>(
    `${PROBE} SELECT c.relname AS relation,
            CASE WHEN c.relkind = 'i' THEN pg_relation_size(c.oid) ELSE pg_table_size(c.oid) END AS bytes
     FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = $1 AND c.relkind IN ('r', 'm', 'i')
     ORDER BY 2 DESC, 1`,
    [schema],
  );
  return rows.map((row) => ({ relation: row.relation, bytes: Number(row.bytes) }));
}

/**
 * VACUUM FULL of every table of `schema`: each is rewritten with its live
 * rows only and its indexes rebuilt, so what is left is what the rows kept
 * take, without the dead space that later rows would reuse.
 */
export async function compactTables(db: BenchDatabase, schema: string): Promise<void> {
  const { rows } = await db.probe.query<{ name: string }>(
    `${PROBE} SELECT format('%I.%I', n.nspname, c.relname) AS name
     FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = $1 AND c.relkind IN ('r', 'm')`,
    [schema],
  );
  for (const { name } of rows) await db.probe.query(`${PROBE} VACUUM FULL ${name}`);
}

/** VACUUM ANALYZE of the whole database, so a bulk-loaded backlog has statistics and a visibility map. */
export async function vacuumAnalyze(db: BenchDatabase): Promise<void> {
  await db.probe.query(`${PROBE} VACUUM ANALYZE`);
}

import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { setQueue, setTenant } from '../../src/engine';
import { pgDb } from '../../src/db/pg';
import { createTestDatabase } from '../support/database';

/**
 * The plans of the claim and the completion, read from inside their
 * functions with auto_explain: whoever changes them is told here when a plan
 * stops reading the jobs table by its indexes (for the claim: the waiting
 * index in order, sorting no jobs; on a deep backlog that is the difference
 * between a millisecond and seconds). Checked on a table with planner
 * statistics and on a fresh one without.
 */
interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  'Index Cond'?: string;
  /** With buffers counted (explainClaim's `buffers`). */
  'Shared Hit Blocks'?: number;
  'Shared Read Blocks'?: number;
  /** Outer for the input a node reads; CTEs and subqueries hang off it as InitPlan or SubPlan. */
  'Parent Relationship'?: string;
  Plans?: PlanNode[];
}

interface ExplainedStatement {
  query: string;
  plan: PlanNode;
}

function nodes(plan: PlanNode): PlanNode[] {
  return [plan, ...(plan.Plans ?? []).flatMap(nodes)];
}

/** Nodes that pass rows through unchanged in order, between a Sort and what it sorts. */
const PASS_THROUGH = new Set(['Limit', 'Result', 'Subquery Scan', 'Materialize', 'LockRows']);

/**
 * Scans of skiplock.jobs that a Sort reads: the claim must never sort the
 * jobs table (sorting the few rows it claimed, read back from a CTE, is fine).
 */
function sortedJobScans(plan: PlanNode): PlanNode[] {
  return nodes(plan)
    .filter((node) => node['Node Type'] === 'Sort')
    .flatMap((sort) => {
      const outer = (node: PlanNode) => node.Plans?.find((child) => child['Parent Relationship'] === 'Outer');
      let input = outer(sort);
      while (input !== undefined && PASS_THROUGH.has(input['Node Type'])) input = outer(input);
      return input?.['Relation Name'] === 'jobs' ? [input] : [];
    });
}

/**
 * Runs a call to one of the engine's functions twice on a connection of its
 * own, and returns the plan of every statement of the jobs table the second
 * call ran (the plans the function keeps, generic ones), as auto_explain logs
 * them (with the buffers each node read when asked).
 */
async function explainCall(
  url: string,
  call: string,
  params: unknown[],
  { buffers = false, calls = 2, settings = [] as string[] } = {},
): Promise<ExplainedStatement[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  const statements: ExplainedStatement[] = [];
  client.on('notice', (notice) => {
    const at = notice.message?.indexOf('{') ?? -1;
    if (at < 0) return;
    const explained = JSON.parse(notice.message!.slice(at)) as { 'Query Text': string; Plan: PlanNode };
    statements.push({ query: explained['Query Text'], plan: explained.Plan });
  });
  try {
    for (const setting of [
      "LOAD 'auto_explain'",
      'SET auto_explain.log_min_duration = 0',
      'SET auto_explain.log_nested_statements = on',
      "SET auto_explain.log_format = 'json'",
      "SET auto_explain.log_level = 'notice'",
      "SET client_min_messages = 'notice'",
      ...(buffers
        ? [
            'SET auto_explain.log_analyze = on',
            'SET auto_explain.log_buffers = on',
            'SET auto_explain.log_timing = off',
          ]
        : []),
      ...settings,
    ]) {
      await client.query(setting);
    }
    for (let time = 0; time < calls; time++) {
      statements.length = 0;
      await client.query(call, params);
    }
  } finally {
    await client.end();
  }
  return statements.filter((statement) => statement.query.includes('skiplock.jobs'));
}

/** Runs claims and returns the plans of the last one's statements (explainCall). */
function explainClaim(
  url: string,
  tenant: string | null,
  { max = 50, buffers = false, calls = 2, settings = [] as string[] } = {},
): Promise<ExplainedStatement[]> {
  return explainCall(
    url,
    'SELECT * FROM skiplock.claim_batch($1, NULL, NULL, NULL, $2, $3)',
    [max, tenant, 'plan-test'],
    {
      buffers,
      calls,
      settings,
    },
  );
}

/** Buffers the scans of an index read in a statement's plan. */
function indexBuffers(plan: PlanNode, index: string): number {
  return nodes(plan)
    .filter((node) => node['Index Name'] === index)
    .reduce((sum, node) => sum + (node['Shared Hit Blocks'] ?? 0) + (node['Shared Read Blocks'] ?? 0), 0);
}

const SEED = /* sql */ `
INSERT INTO skiplock.tenants (name) SELECT 't' || g FROM generate_series(1, $1::int) g ON CONFLICT DO NOTHING;
`;

describe('the claim plan', () => {
  const cleanups: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  async function seededDatabase(tenants: number, analyzed: boolean, queues = 1): Promise<string> {
    const database = await createTestDatabase();
    cleanups.push(database.drop);
    const db = pgDb(database.url, { max: 1 });
    try {
      await db.query({ text: SEED, params: [tenants] });
      // 20,000 waiting jobs over the tenants, and 20,000 finished ones.
      await db.query({
        text: `INSERT INTO skiplock.jobs (id, queue, type, tenant, payload)
               SELECT skiplock.uuid_v7(clock_timestamp(), g), 'q' || (g % $2::int), 'q', 't' || (1 + g % $1::int), 'null'
               FROM generate_series(1, 20000) g`,
        params: [tenants, queues],
      });
      await db.query({
        text: `INSERT INTO skiplock.finished_jobs
                 (id, queue, type, tenant, state, priority, run_at, attempts, max_attempts, lease_seconds,
                  backoff_base_seconds, backoff_max_seconds, dedup_window_seconds, created_at, payload, finished_at)
               SELECT skiplock.uuid_v7(clock_timestamp(), g), 'q', 'q', 't1', 'succeeded', 0, now(), 1, 5, 60, 1, 3600, 0,
                      now(), 'null', now()
               FROM generate_series(1, 20000) g`,
        params: [],
      });
      if (tenants > 1) await setTenant(db, 't1', { concurrency: 5, rateLimit: null, weight: 1 });
      if (queues > 1) await setQueue(db, 'q1', { concurrency: 3, weight: 2 });
      if (analyzed) await db.query({ text: 'ANALYZE', params: [] });
    } finally {
      await db.close();
    }
    return database.url;
  }

  /**
   * A drain leaves the index entries of the jobs it claimed at the front of
   * their queue until vacuum removes them. The claim probes the index for
   * the first waiting job once, stepping over them, and starts its scan of
   * the queue there: a claim of one job after 10,000 others were claimed
   * reads a few index pages, where starting at the queue's front read the
   * whole dead stretch again. A session that found that walk slow keeps
   * where it found the first job (the claim hint), and its next claim's
   * probe starts there.
   */
  it('steps over the entries of jobs claimed before it once, in its first probe, not in every scan nor from a hint', async () => {
    const url = await seededDatabase(1, true);
    const db = pgDb(url, { max: 1 });
    try {
      await db.query({ text: 'ALTER TABLE skiplock.jobs SET (autovacuum_enabled = off)', params: [] });
      await db.query({
        text: `DO $$ BEGIN
                 FOR i IN 1..20 LOOP
                   PERFORM skiplock.complete_jobs(c.ids, c.tokens, NULL, NULL, false)
                   FROM (SELECT array_agg(id) AS ids, array_agg("leaseToken") AS tokens
                         FROM skiplock.claim_batch(500, NULL, NULL, NULL, NULL, 'before')) c;
                 END LOOP;
               END $$`,
        params: [],
      });
    } finally {
      await db.close();
    }
    const statements = await explainClaim(url, null, { max: 1, buffers: true });
    const probe = statements.find(
      ({ query }) => query.includes('INTO first_tenant') || (query.includes('LIMIT 1') && !query.includes('>')),
    );
    const scan = statements.find(
      ({ query }) => query.includes('FOR UPDATE SKIP LOCKED') && query.includes('first_rank'),
    );
    expect(probe, statements.map(({ query }) => query).join('\n---\n')).toBeDefined();
    expect(scan).toBeDefined();
    // The 10,000 claimed jobs' entries fill dozens of index pages; the probe reads them, the scan does not.
    expect(indexBuffers(probe!.plan, 'jobs_waiting_idx')).toBeGreaterThan(30);
    expect(indexBuffers(scan!.plan, 'jobs_waiting_idx')).toBeLessThanOrEqual(5);

    // A session that found the walk slow keeps where it found the first job, and its next probe starts there.
    const hinted = await explainClaim(url, null, {
      max: 1,
      buffers: true,
      calls: 3,
      settings: ['SET skiplock.claim_hint_after_ms = 0'],
    });
    const fromHint = hinted.filter(({ query }) => query.includes('hint[2]'));
    const fromFront = hinted.filter(({ query }) => query.includes('LIMIT 1') && !query.includes('>'));
    expect(fromHint, hinted.map(({ query }) => query).join('\n---\n')).toHaveLength(1);
    expect(fromFront).toEqual([]);
    expect(indexBuffers(fromHint[0]!.plan, 'jobs_waiting_idx')).toBeLessThanOrEqual(5);
  });

  for (const analyzed of [true, false]) {
    const statistics = analyzed ? 'with planner statistics' : 'on a table never analyzed';

    it(`one tenant without limits, ${statistics}: reads the waiting index, sorts no jobs`, async () => {
      const statements = await explainClaim(await seededDatabase(1, analyzed), null);
      expect(statements.length).toBeGreaterThan(0);
      for (const { query, plan } of statements) {
        expect(sortedJobScans(plan), query).toEqual([]);
        expect(
          nodes(plan).filter((node) => node['Node Type'] === 'Seq Scan' && node['Relation Name'] === 'jobs'),
          query,
        ).toEqual([]);
      }
      const indexes = statements.flatMap(({ plan }) => nodes(plan).map((node) => node['Index Name']));
      expect(indexes).toContain('jobs_waiting_idx');
    });

    it(`one tenant with several queues, one of them capped, ${statistics}: reads the waiting index, sorts no jobs`, async () => {
      const statements = await explainClaim(await seededDatabase(1, analyzed, 5), null);
      for (const { query, plan } of statements) {
        expect(sortedJobScans(plan), query).toEqual([]);
        expect(
          nodes(plan).filter((node) => node['Node Type'] === 'Seq Scan' && node['Relation Name'] === 'jobs'),
          query,
        ).toEqual([]);
      }
      const indexes = statements.flatMap(({ plan }) => nodes(plan).map((node) => node['Index Name']));
      expect(indexes).toContain('jobs_waiting_idx');
    });

    it(`many tenants, one of them limited, ${statistics}: reads the waiting index, sorts no jobs`, async () => {
      const statements = await explainClaim(await seededDatabase(50, analyzed), null);
      for (const { query, plan } of statements) {
        expect(sortedJobScans(plan), query).toEqual([]);
        expect(
          nodes(plan).filter((node) => node['Node Type'] === 'Seq Scan' && node['Relation Name'] === 'jobs'),
          query,
        ).toEqual([]);
      }
      const indexes = statements.flatMap(({ plan }) => nodes(plan).map((node) => node['Index Name']));
      expect(indexes).toContain('jobs_waiting_idx');
    });
  }
});

describe('the completion plan', () => {
  const cleanups: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  /**
   * A connection keeps the plan it made at its first completion. Made on an
   * empty queue, whose statistics say the table holds nothing, the cheapest
   * plan would read the whole table for the batch's jobs, and keep doing so
   * once the queue has grown: the completion must find them by their ids.
   */
  for (const queue of ['empty', 'deep'] as const) {
    it(`planned on ${queue === 'empty' ? 'an empty' : 'a deep'} queue, finds the batch's jobs by their ids and reads no other`, async () => {
      const database = await createTestDatabase();
      cleanups.push(database.drop);
      const db = pgDb(database.url, { max: 1 });
      try {
        await db.query({ text: SEED, params: [1] });
        if (queue === 'deep') {
          await db.query({
            text: `INSERT INTO skiplock.jobs (queue, type, tenant, payload) SELECT 'q', 'q', 't1', 'null' FROM generate_series(1, 20000)`,
            params: [],
          });
        }
        await db.query({ text: 'ANALYZE skiplock.jobs', params: [] });
      } finally {
        await db.close();
      }
      const statements = await explainCall(
        database.url,
        'SELECT * FROM skiplock.complete_jobs($1::uuid[], $2::uuid[], NULL, NULL, false)',
        [
          [crypto.randomUUID(), crypto.randomUUID()],
          [crypto.randomUUID(), crypto.randomUUID()],
        ],
      );
      const scans = statements.flatMap(({ plan }) =>
        nodes(plan).filter((node) => node['Relation Name'] === 'jobs' && node['Node Type'] !== 'ModifyTable'),
      );
      expect(scans.length).toBeGreaterThan(0);
      for (const scan of scans) {
        expect(scan).toMatchObject({
          'Node Type': 'Index Scan',
          'Index Name': 'jobs_pkey',
          'Index Cond': expect.stringContaining('ANY'),
        });
      }
    });
  }
});

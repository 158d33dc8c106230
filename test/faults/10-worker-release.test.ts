import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { pgDb } from '../../src/db/pg';
import type { Db } from '../../src/db/types';
import { defineJob } from '../../src/drain/define-job';
import { drainWorkerId } from '../../src/engine/worker-id';
import { sleep } from '../../src/engine/sleep';
import { listJobs } from '../../src/engine';
import { apiOver } from '../support/api-over';
import { engineDatabases } from '../support/engine-db';
import { drain } from '../drain/support/drain';
import { enqueueMany, jobs } from './support/load';
import { recordScenario, seconds } from './support/report';

const open = engineDatabases();

const JOBS = 30;
/** Slots enough that a job handed back is claimed again at once, while the attempt that held it may still run. */
const DRAIN_CONCURRENCY = 16;
const WORK_MS = 1200;
/** The pull worker's jobs are long: it dies in the middle of them. */
const PULLED_WORK_MS = 20_000;
const LEASE_SECONDS = 3;
const ADMIN = 'faults-release-admin-token';
const PULL_WORKER = 'release-puller';

/**
 * Every execution of a job's work, as its worker saw it: the handler writes
 * a row when it starts and stamps it when it stops, on the database's clock.
 * The job's own history cannot show two attempts at once here: an attempt
 * handed back by a release has ended there, whether or not its worker stopped.
 */
const ledgerSql = `CREATE TABLE release_ledger (
  job_id uuid NOT NULL, attempt integer NOT NULL, worker_id text NOT NULL, started_at timestamptz NOT NULL, ended_at timestamptz)`;

/** Does a job's work for `ms`, or less if `signal` stops it; the ledger's times are when it began and stopped. */
async function work(
  ledger: Db,
  job: { id: string; attempts: number; workerId: string | null },
  ms: number,
  signal: AbortSignal,
): Promise<void> {
  const startedAt = new Date();
  const [row] = await ledger.query<{ n: string }>({
    text: 'INSERT INTO release_ledger (job_id, attempt, worker_id, started_at) VALUES ($1, $2, $3, $4) RETURNING ctid::text AS n',
    params: [job.id, job.attempts, job.workerId ?? '?', startedAt],
  });
  await sleep(ms, signal);
  await ledger.query({
    text: 'UPDATE release_ledger SET ended_at = $2 WHERE ctid = $1::tid',
    params: [row!.n, new Date()],
  });
}

/** Jobs with two executions whose times overlap. */
async function runTwiceAtOnce(ledger: Db): Promise<string[]> {
  const rows = await ledger.query<{ job_id: string }>({
    text: `SELECT DISTINCT a.job_id FROM release_ledger a JOIN release_ledger b
           ON a.job_id = b.job_id AND a.ctid < b.ctid
           AND a.started_at < coalesce(b.ended_at, 'infinity') AND b.started_at < coalesce(a.ended_at, 'infinity')`,
    params: [],
  });
  return rows.map((row) => row.job_id);
}

describe('scenario 10: hand-backs of a worker while it runs its jobs', () => {
  it("refuses every release but the worker's own, and a crashed worker's release runs its jobs again, never twice at once", async () => {
    const { db, url } = await open('pg', 6);
    const ledger = pgDb(url, { max: 4 });
    await ledger.query({ text: ledgerSql, params: [] });
    const ledgered = defineJob('ledgered', z.unknown(), (_payload, context) =>
      work(ledger, context.job, WORK_MS, context.signal),
    );
    await enqueueMany(
      db,
      jobs(JOBS, (i) => ({
        queue: 'release',
        type: 'ledgered',
        tenant: i % 2 === 0 ? 'acme' : 'globex',
        leaseSeconds: LEASE_SECONDS,
      })),
    );

    // The HTTP API over the same database, as a Worker serves it.
    const apiDb = pgDb(url, { max: 4 });
    const app = apiOver(apiDb, ADMIN, { sessionDatabase: () => apiDb });
    const api = async (path: string, key: string, body?: unknown) => {
      const response = await app.request(path, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify(body ?? {}),
      });
      return { status: response.status, json: (await response.json()) as Record<string, unknown> };
    };
    const key = async (scopes: string[], bound: { tenant?: string; workerId?: string } = {}) =>
      (await api('/v1/keys', ADMIN, { name: 'release-scenario', scopes, ...bound })).json.secret as string;
    const pullerKey = await key(['worker'], { workerId: PULL_WORKER });
    const attackers = {
      admin: ADMIN,
      'unbound worker key': await key(['worker']),
      'tenant-bound worker key': await key(['worker'], { tenant: 'acme' }),
      'key bound to another worker': await key(['worker'], { workerId: 'someone-else' }),
    };

    // A pull worker over HTTP with a key of its own; it crashes once, mid-job, and on its restart hands back what it held.
    const crash = new AbortController();
    const pulled = new Set<string>();
    const puller = (async () => {
      const running = new Set<Promise<void>>();
      while (!crash.signal.aborted) {
        const { json } =
          running.size < 4
            ? await api('/v1/queues/release/claim', pullerKey, { max: 2, workerId: PULL_WORKER, leaseSeconds: 60 })
            : { json: { jobs: [] } };
        for (const job of json.jobs as Array<{ id: string; attempts: number; workerId: string; leaseToken: string }>) {
          pulled.add(job.id);
          const run = work(ledger, job, PULLED_WORK_MS, crash.signal).then(async () => {
            // A crashed worker acknowledges nothing.
            if (!crash.signal.aborted)
              await api(`/v1/jobs/${job.id}/complete`, pullerKey, { leaseToken: job.leaseToken });
          });
          running.add(run);
          void run.finally(() => running.delete(run));
        }
        await sleep(100, crash.signal);
      }
      await Promise.all(running);
    })();

    // Once the pull worker holds its jobs, the drains take the rest.
    while (pulled.size < 4) await sleep(50);
    // Two drains as a Worker's cron runs them (their ids in skiplock's own namespace), on connections of their own.
    let flowing = true;
    const drains = [0, 1].map(async () => {
      const own = pgDb(url, { max: 4 });
      try {
        while (flowing) {
          await drain(own, [ledgered], {
            budgetSeconds: 4,
            concurrency: DRAIN_CONCURRENCY,
            workerId: drainWorkerId('cron'),
          });
        }
      } finally {
        await own.close();
      }
    });

    // Attackers try to hand back whatever runs, under every worker id they see, while it runs.
    const refusals = new Map<string, number>();
    let accepted = 0;
    let attempts = 0;
    const attack = async () => {
      const { jobs: running } = await listJobs(db, { queue: 'release', status: 'running', limit: 100 });
      const ids = new Set(running.map((job) => job.workerId!));
      for (const workerId of ids) {
        for (const [who, secret] of Object.entries(attackers)) {
          const answer = await api(`/v1/workers/${encodeURIComponent(workerId)}/release`, secret);
          attempts += 1;
          if (answer.status === 200 && (answer.json.jobs as unknown[]).length > 0) accepted += 1;
          else refusals.set(`${who}: ${answer.status}`, (refusals.get(`${who}: ${answer.status}`) ?? 0) + 1);
        }
      }
    };
    const started = Date.now();
    while (Date.now() - started < 3000) await attack();

    // The pull worker dies mid-job (its work stops), then starts again and hands back what it held.
    crash.abort();
    await puller;
    const { status, json } = await api(`/v1/workers/${PULL_WORKER}/release`, pullerKey);
    const handedBack = (json.jobs as Array<{ id: string }>).map((job) => job.id);
    const recoveredFrom = Date.now();
    // The attacks go on while the handed-back jobs run again, for a while; then the queue is left to finish.
    while (Date.now() - recoveredFrom < 2000) await attack();
    const unfinished = () =>
      db
        .query<{ left: number }>({
          text: "SELECT count(*)::integer AS left FROM skiplock.all_jobs WHERE queue = 'release' AND state <> 'succeeded'",
          params: [],
        })
        .then((rows) => rows[0]!.left);
    while ((await unfinished()) > 0 && Date.now() - recoveredFrom < 60_000) await sleep(200);
    const recoveryMs = Date.now() - recoveredFrom;
    flowing = false;
    await Promise.all(drains);

    const twice = await runTwiceAtOnce(ledger);
    const { jobs: all } = await listJobs(db, { queue: 'release', limit: 500 });
    const lost = all.filter((job) => job.status !== 'succeeded').length + (JOBS - all.length);
    await Promise.all([ledger.close(), apiDb.close()]);
    await recordScenario({
      scenario: 10,
      name: 'Worker hand-backs while it runs',
      load:
        `${JOBS} jobs over two tenants: ${WORK_MS} ms of work in two drains under skiplock's own worker ids, ` +
        `${PULLED_WORK_MS} ms in a pull worker with a key bound to its id`,
      faults:
        `${attempts} hand-backs of running workers' ids by an admin key, an unbound, a tenant-bound and another worker's key; ` +
        'the pull worker killed mid-job, then its own hand-back on restart',
      jobsLost: lost,
      runTwiceAtOnce: twice.length,
      limitViolations: accepted,
      recovery: `the crashed worker's ${handedBack.length} job(s) back at once; all ${JOBS} done ${seconds(recoveryMs)} after its restart`,
      notes: [
        `limit violations here: hand-backs by anyone but the worker that owns the id that changed a job (${accepted})`,
        `refused: ${[...refusals].map(([answer, count]) => `${answer} x${count}`).join(', ')}`,
      ],
    });

    expect(status).toBe(200);
    expect(handedBack.length).toBeGreaterThan(0);
    expect(handedBack.every((id) => pulled.has(id))).toBe(true);
    expect(accepted).toBe(0);
    expect([...refusals.keys()].every((answer) => /: 40[03]$/.test(answer))).toBe(true);
    expect(twice).toEqual([]);
    expect(lost).toBe(0);
  });
});

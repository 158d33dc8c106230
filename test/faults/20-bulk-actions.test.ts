import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { pgDb } from '../../src/db/pg';
import type { Db, Queryable } from '../../src/db/types';
import { type BulkActionRequest, type BulkActionResult, bulkAction, type EnqueueInput } from '../../src/engine';
import { sleep } from '../../src/engine/sleep';
import { apiOver } from '../support/api-over';
import { engineDatabases } from '../support/engine-db';
import { waitFor } from '../support/wait-for';
import { runHistory } from './support/history';
import {
  createKeyedLedger,
  KEYED_TYPE,
  ledgerRuns,
  overlappingAttempts,
  seeded,
  startCrew,
  succeededTwice,
} from './support/keyed-ledger';
import { enqueueMany } from './support/load';
import { processes } from './support/processes';
import { recordScenario, seconds } from './support/report';

const open = engineDatabases();
const spawn = processes(join(tmpdir(), `skiplock-faults-bulk-${process.pid}.log`));

/** The queue the crew drains, and the one whose failures are redriven into it. */
const QUEUE = 'busy';
const DEAD_QUEUE = 'busy-failed';
/** Live jobs of `busy` per tenant: acme's waiting ones are cancelled, initech's rescheduled, globex's only run. */
const LIVE = { acme: 20_000, globex: 2_000, initech: 1_000 } as const;
/** Failed jobs of `busy-failed` (of a fourth tenant, so that no other action reaches them), redriven into `busy`. */
const DEAD = 1_500;
/** Succeeded jobs of `busy` already in the history (the last hour), deleted with those the drains finish before the cut. */
const HISTORY = 20_000;
const CREW = { drains: 4, pulls: 4 };
const LEASE_SECONDS = 2;
const KILLS = 3;
/** One live job in this many fails its first attempt (and is retried by the drains). */
const FAIL_FIRST_ONE_IN = 20;
/** The rescheduled jobs start no sooner than this after the reschedule. */
const DELAY_SECONDS = 2;
/** How long the drains run alone, for their pace before the actions. */
const ALONE_MS = 3000;

/** Every row removed from the history, by whom it may be: the bulk delete, or a redrive moving it back. */
const NOTE_DELETES_SQL = /* sql */ `
CREATE TABLE expected (id uuid PRIMARY KEY, role text NOT NULL);
CREATE INDEX keyed_ledger_job_idx ON keyed_ledger (job_id);
CREATE TABLE history_deletes (id uuid NOT NULL, queue text NOT NULL, state text NOT NULL, finished_at timestamptz NOT NULL);
CREATE FUNCTION note_history_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO public.history_deletes VALUES (OLD.id, OLD.queue, OLD.state, OLD.finished_at);
  RETURN NULL;
END
$$;
CREATE TRIGGER finished_jobs_note_delete AFTER DELETE ON skiplock.finished_jobs
  FOR EACH ROW EXECUTE FUNCTION note_history_delete();`;

/**
 * $2 finished jobs of the queue $1 and the tenant $6 in the state $3 after
 * $4 attempts, the nth finished n/$2 of an hour (and a minute) ago, with a
 * `failed` event of their first attempt each; noted in `expected` as the
 * role $5.
 */
const seedSql = /* sql */ `
WITH seeded AS (
  INSERT INTO skiplock.finished_jobs (id, queue, type, tenant, state, priority, run_at, attempts, max_attempts,
    lease_seconds, backoff_base_seconds, backoff_max_seconds, dedup_window_seconds, created_at, started_at,
    payload, finished_at)
  SELECT gen_random_uuid(), $1, '${KEYED_TYPE}', $6, $3, 0, at, $4, $4,
         ${LEASE_SECONDS}, 0.1, 0.5, 0, at, at, jsonb_build_object('seq', n, 'workMs', 2 + n % 19), at
  FROM generate_series(1, $2::integer) AS n
  CROSS JOIN LATERAL (SELECT now() - make_interval(secs => 60 + n * 3600.0 / $2)) AS t(at)
  RETURNING id
),
events AS (
  INSERT INTO skiplock.job_events (job_id, kind, attempt, detail) SELECT id, 'failed', 1, '{}' FROM seeded
)
INSERT INTO expected SELECT id, $5 FROM seeded`;

/**
 * Each job's ending, what the ledger saw run ($1: the killed workers, $2:
 * the delete's cut-off), and what the bulk actions wrote of it; then its
 * verdict: 'ok', or what went wrong, by name.
 */
const verdictSql = /* sql */ `
WITH gone AS (
  SELECT DISTINCT ON (d.id) d.* FROM history_deletes d
  WHERE NOT EXISTS (SELECT 1 FROM skiplock.all_jobs a WHERE a.id = d.id)
  ORDER BY d.id
),
job AS (
  SELECT x.id, x.role,
         CASE WHEN j.id IS NOT NULL THEN 'live' WHEN f.id IS NOT NULL THEN f.state
              WHEN g.id IS NOT NULL THEN 'deleted ' || g.state ELSE 'missing' END AS ending,
         coalesce(j.queue, f.queue) AS queue,
         g.id IS NOT NULL AND (g.queue <> '${QUEUE}' OR g.finished_at >= $2::timestamptz) AS "deletedPastCut",
         (SELECT count(*) FROM skiplock.finished_jobs c WHERE c.id = x.id) AS endings,
         (SELECT count(*) FROM skiplock.job_events e WHERE e.job_id = x.id) AS events,
         (SELECT count(*) FROM keyed_ledger l WHERE l.job_id = x.id AND l.outcome = 'done') AS done,
         (SELECT count(*) FROM keyed_ledger l WHERE l.job_id = x.id AND l.outcome = 'done'
                                                AND l.worker_id <> ALL ($1::text[])) AS "doneAndAcknowledgeable",
         c.at AS "cancelledAt", c.n AS cancels,
         (SELECT count(*) FROM skiplock.job_events e
          WHERE e.job_id = x.id AND e.kind = 'retried' AND e.detail->>'bulk' = 'redrive'
            AND e.detail->>'fromQueue' = '${DEAD_QUEUE}') AS redrives,
         (SELECT count(*) FROM skiplock.job_events e JOIN keyed_ledger l ON l.job_id = e.job_id
          WHERE e.job_id = x.id AND e.kind = 'rescheduled' AND e.detail->>'bulk' = 'reschedule'
            AND l.started_at > e.at AND l.started_at < (e.detail->'to'->>'runAt')::timestamptz) AS "startedEarly"
  FROM expected x
  LEFT JOIN skiplock.jobs j ON j.id = x.id
  LEFT JOIN skiplock.finished_jobs f ON f.id = x.id
  LEFT JOIN gone g ON g.id = x.id
  LEFT JOIN LATERAL (SELECT max(e.at) AS at, count(*) AS n FROM skiplock.job_events e
                     WHERE e.job_id = x.id AND e.kind = 'cancelled' AND e.detail->>'bulk' = 'cancel') c ON true
),
verdict AS (
  SELECT role, ending,
    CASE
      WHEN ending IN ('live', 'missing') THEN 'neither cancelled nor completed'
      WHEN endings > 1 THEN 'finished twice'
      WHEN ending LIKE 'deleted%' AND "deletedPastCut" THEN 'deleted though finished after the cut or in another queue'
      WHEN ending LIKE 'deleted%' AND events > 0 THEN 'deleted but its events kept'
      WHEN ending LIKE 'deleted%' AND ending <> 'deleted succeeded' THEN 'deleted though not succeeded'
      WHEN role = 'history' THEN CASE WHEN ending = 'succeeded' THEN 'left behind by the delete' ELSE 'ok' END
      WHEN role = 'cancel' AND ending = 'cancelled' THEN
        CASE WHEN cancels <> 1 THEN 'cancelled but not by the bulk cancel'
             WHEN "doneAndAcknowledgeable" > 0 THEN 'both completed and cancelled'
             WHEN EXISTS (SELECT 1 FROM keyed_ledger l WHERE l.job_id = job.id AND l.started_at > job."cancelledAt")
               THEN 'ran after its cancel'
             ELSE 'ok' END
      WHEN ending NOT IN ('succeeded', 'deleted succeeded') THEN 'ended ' || ending
      WHEN done = 0 THEN 'succeeded without running'
      WHEN cancels > 0 THEN 'both completed and cancelled'
      WHEN role = 'redrive' AND (redrives <> 1 OR queue IS DISTINCT FROM '${QUEUE}') THEN 'not redriven once into ${QUEUE}'
      WHEN role = 'reschedule' AND "startedEarly" > 0 THEN 'started before its new time'
      ELSE 'ok' END AS verdict
  FROM job
)
SELECT role, ending, verdict, count(*)::integer AS jobs FROM verdict GROUP BY role, ending, verdict ORDER BY role, ending`;

interface VerdictRow {
  role: string;
  ending: string;
  verdict: string;
  jobs: number;
}

/** Verdicts that are a count of the scenario's limit violations; every other one but 'ok' is a job lost. */
const VIOLATIONS = ['started before its new time', 'left behind by the delete'];

/** What the database shows each action changed, to hold its `changed` against. */
const changedSql = /* sql */ `
SELECT
  (SELECT count(*) FROM skiplock.job_events WHERE kind = 'cancelled' AND detail->>'bulk' = 'cancel')::integer AS cancel,
  (SELECT count(*) FROM skiplock.finished_jobs
   WHERE queue = '${QUEUE}' AND state = 'cancelled')::integer AS "cancelledJobs",
  (SELECT count(*) FROM skiplock.job_events WHERE kind = 'retried' AND detail->>'bulk' = 'redrive')::integer AS redrive,
  (SELECT count(*) FROM skiplock.job_events WHERE kind = 'rescheduled' AND detail->>'bulk' = 'reschedule')::integer
    AS reschedule,
  (SELECT count(*) FROM history_deletes d
   WHERE NOT EXISTS (SELECT 1 FROM skiplock.all_jobs a WHERE a.id = d.id))::integer AS delete`;

/** The evidence of a rescheduled job started before its new time: the reschedule and the attempts after it. */
const startedEarlySql = /* sql */ `
SELECT e.job_id AS job, e.at::text AS "rescheduledAt", e.detail->'to'->>'runAt' AS "runAt",
       json_agg(json_build_object('attempt', l.attempt, 'worker', l.worker_id, 'startedAt', l.started_at::text)
                ORDER BY l.started_at) AS attempts
FROM skiplock.job_events e JOIN keyed_ledger l ON l.job_id = e.job_id AND l.started_at > e.at
WHERE e.kind = 'rescheduled' AND e.detail->>'bulk' = 'reschedule'
GROUP BY e.job_id, e.at, e.detail
HAVING min(l.started_at) < (e.detail->'to'->>'runAt')::timestamptz`;

/** The database's clock: ISO-8601 to the microsecond, and in milliseconds. */
async function clock(db: Queryable): Promise<{ at: string; ms: number }> {
  const [row] = await db.query<{ at: string; ms: number }>({
    text: `SELECT to_json(t) #>> '{}' AS at, extract(epoch FROM t)::float8 * 1000 AS ms FROM clock_timestamp() AS t`,
    params: [],
  });
  return row!;
}

type RunBulk = (request: BulkActionRequest) => Promise<BulkActionResult>;

/**
 * A bulk action over HTTP as an operator sends it: `POST /v1/jobs/bulk` to
 * the API over `db` (as a Worker serves it), again with each `nextCursor`
 * until the answer has none; the answers summed.
 */
function bulkOverHttp(db: Db): RunBulk {
  const token = 'bulk-admin-token';
  const app = apiOver(db, token);
  return async (request) => {
    let total: BulkActionResult | undefined;
    for (let cursor: string | undefined; ; ) {
      const response = await app.request('/v1/jobs/bulk', {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ ...request, cursor }),
      });
      if (response.status !== 200) throw new Error(`POST /v1/jobs/bulk: ${response.status} ${await response.text()}`);
      const answer = (await response.json()) as BulkActionResult;
      total =
        total === undefined
          ? answer
          : {
              ...answer,
              matched: total.matched + answer.matched,
              changed: total.changed + answer.changed,
              batches: total.batches + answer.batches,
            };
      if (answer.nextCursor === null) return total;
      cursor = answer.nextCursor;
    }
  };
}

/** Attempts the handlers finished with success in [from, to), per second. */
async function pace(db: Queryable, from: { at: string; ms: number }, to: { at: string; ms: number }): Promise<number> {
  const [row] = await db.query<{ done: number }>({
    text: `SELECT count(*)::integer AS done FROM keyed_ledger
           WHERE outcome = 'done' AND ended_at >= $1::timestamptz AND ended_at < $2::timestamptz`,
    params: [from.at, to.at],
  });
  return (row!.done * 1000) / (to.ms - from.ms);
}

interface Timed {
  dryRun: BulkActionResult;
  result: BulkActionResult;
  ms: number;
}

/** The action's dry run, then the action itself, timed. */
async function dryThenRun(run: RunBulk, request: BulkActionRequest): Promise<Timed> {
  const dryRun = await run({ ...request, dryRun: true });
  const started = Date.now();
  const result = await run(request);
  return { dryRun, result, ms: Date.now() - started };
}

describe('scenario 20: bulk actions by filter during a busy drain, workers killed mid-job', () => {
  it('cancels, redrives, reschedules and deletes in batches beside the drains: no job both cancelled and run or neither, counts as the database shows them', {
    timeout: 120_000,
  }, async () => {
    const { db, url } = await open('pg', 4);
    await createKeyedLedger(db);
    await db.query({ text: NOTE_DELETES_SQL, params: [] });
    await db.query({ text: seedSql, params: [QUEUE, HISTORY, 'succeeded', 1, 'history', 'globex'] });
    await db.query({ text: seedSql, params: [DEAD_QUEUE, DEAD, 'failed', 3, 'redrive', 'hooli'] });

    const random = seeded(20);
    const roles = { acme: 'cancel', globex: 'keep', initech: 'reschedule' } as const;
    const tenants = Object.entries(LIVE).flatMap(([tenant, count]) => Array<string>(count).fill(tenant));
    const inputs: EnqueueInput[] = tenants
      .map((tenant) => ({ tenant, order: random() }))
      .sort((a, b) => a.order - b.order)
      .map(({ tenant }, seq) => ({
        queue: QUEUE,
        type: KEYED_TYPE,
        tenant,
        payload: { seq, workMs: Math.round(10 + random() * 50), failFirst: random() * FAIL_FIRST_ONE_IN < 1 },
        leaseSeconds: LEASE_SECONDS,
        maxAttempts: 10,
        backoffBaseSeconds: 0.1,
        backoffMaxSeconds: 0.5,
      }));

    // The crew starts while the jobs are enqueued; the drains' pace alone is measured once all are connected.
    const starting = startCrew(spawn, db, url, CREW);
    await enqueueMany(db, inputs);
    await db.query({
      text: `INSERT INTO expected SELECT id, CASE tenant WHEN 'acme' THEN $1 WHEN 'globex' THEN $2 ELSE $3 END
             FROM skiplock.all_jobs WHERE queue = '${QUEUE}' AND id NOT IN (SELECT id FROM expected)`,
      params: [roles.acme, roles.globex, roles.initech],
    });
    const crew = await starting;
    const connected = await crew.untilAllConnected(60_000);
    const alone = await clock(db);
    await sleep(ALONE_MS);

    // The actions, all at once on a pool of their own: the engine's, and the delete over HTTP (20 batches a request,
    // then its cursor). The delete takes what succeeded before they began, starting a second later, so that no
    // completion stamped before the cut-off is still to commit when it passes.
    const actions = pgDb(url, { max: 4 });
    const overEngine: RunBulk = (request) => bulkAction(actions, request);
    const started = await clock(db);
    const cutOff = started.at;
    const running = Promise.all([
      dryThenRun(overEngine, { action: 'cancel', filter: { queue: QUEUE, tenant: 'acme', status: 'queued' } }),
      dryThenRun(overEngine, { action: 'redrive', filter: { queue: DEAD_QUEUE }, toQueue: QUEUE }),
      dryThenRun(overEngine, {
        action: 'reschedule',
        filter: { queue: QUEUE, tenant: 'initech', status: 'queued' },
        change: { delaySeconds: DELAY_SECONDS },
      }),
      sleep(1000).then(() =>
        dryThenRun(bulkOverHttp(actions), {
          action: 'delete',
          filter: { queue: QUEUE, status: 'succeeded', finishedBefore: cutOff },
        }),
      ),
    ]);
    for (let i = 0; i < KILLS; i++) {
      await sleep(700);
      await crew.kill(i % 2 === 0 ? 'drain' : 'pull');
    }
    const [cancel, redrive, reschedule, remove] = await running;
    const ended = await clock(db);
    await actions.close();

    await waitFor(
      `every job of ${QUEUE} to end`,
      async () =>
        (
          await db.query<{ n: number }>({
            text: `SELECT count(*)::integer AS n FROM skiplock.jobs WHERE queue = '${QUEUE}'`,
            params: [],
          })
        )[0]!.n === 0,
      { timeoutMs: 60_000, everyMs: 200 },
    );
    const settled = await clock(db);

    const killed = crew.kills.map((kill) => kill.workerId);
    const verdicts = await db.query<VerdictRow>({ text: verdictSql, params: [killed, cutOff] });
    const wrong = verdicts.filter((row) => row.verdict !== 'ok');
    const violations = wrong.filter((row) => VIOLATIONS.includes(row.verdict));
    const lost = wrong.filter((row) => !VIOLATIONS.includes(row.verdict));
    const sum = (rows: readonly VerdictRow[]) => rows.reduce((total, row) => total + row.jobs, 0);
    const jobsOf = (role: string, ending: string) =>
      sum(verdicts.filter((row) => row.role === role && row.ending === ending));

    const [changed] = await db.query<{
      cancel: number;
      cancelledJobs: number;
      redrive: number;
      reschedule: number;
      delete: number;
    }>({ text: changedSql, params: [] });
    // Each action's `changed` beside what the database shows it changed; the dry runs beside the jobs
    // matched where nothing else moves them (the history before the cut, the failed jobs of their own queue).
    const counts = {
      cancel: { changed: cancel.result.changed, shown: changed!.cancel, cancelledJobs: changed!.cancelledJobs },
      cancelRequested: cancel.result.cancelRequested,
      redrive: { changed: redrive.result.changed, shown: changed!.redrive, dryRun: redrive.dryRun.matched, all: DEAD },
      reschedule: { changed: reschedule.result.changed, shown: changed!.reschedule },
      delete: { changed: remove.result.changed, shown: changed!.delete, dryRun: remove.dryRun.matched },
    };
    const countsAgreeing = [
      counts.cancel.changed === counts.cancel.shown && counts.cancel.shown === counts.cancel.cancelledJobs,
      counts.cancelRequested === 0,
      counts.redrive.changed === counts.redrive.shown &&
        counts.redrive.dryRun === DEAD &&
        counts.redrive.changed === DEAD,
      counts.reschedule.changed === counts.reschedule.shown,
      counts.delete.changed === counts.delete.shown && counts.delete.dryRun === remove.result.matched,
    ];
    const countsOff = countsAgreeing.filter((agrees) => !agrees).length;

    const history = await runHistory(db);
    const twice = new Set([
      ...history.runTwiceAtOnce,
      ...overlappingAttempts(await ledgerRuns(db, crew.killedAt())),
      ...(await succeededTwice(db)),
    ]);
    const paceAlone = await pace(db, alone, started);
    const paceDuring = await pace(db, started, ended);
    const cutAttempts = crew.kills.reduce((total, kill) => total + kill.cutAttempts, 0);
    const targets = counts.cancel.changed + DEAD + counts.reschedule.changed + counts.delete.changed;
    const liveJobs = inputs.length;

    const action = (name: string, timed: Timed, extra = '') =>
      `${name}: dry run ${timed.dryRun.matched}, matched ${timed.result.matched}, changed ${timed.result.changed} ` +
      `in ${timed.result.batches} batches over ${seconds(timed.ms)}${extra}`;
    await recordScenario({
      scenario: 20,
      name: 'Bulk actions during a busy drain',
      load:
        `${liveJobs} live jobs of one queue (${LIVE.acme} of a tenant to cancel, ${LIVE.initech} of one to reschedule, ${LIVE.globex} of a third), ` +
        `${DEAD} failed jobs of another queue to redrive into it, ${HISTORY} finished ones in its history to delete: ` +
        `bulk actions on ${targets} jobs (the issue's 100,000 scaled down); work of 10 to 60 ms, 1 in ${FAIL_FIRST_ONE_IN} ` +
        `failing its first attempt; ${CREW.drains} drain processes + ${CREW.pulls} pull-worker processes × 4, lease ${LEASE_SECONDS} s`,
      faults:
        `a bulk cancel, redrive and reschedule (the engine's) and delete (over HTTP, its cursor carried on), in batches of 500 with pause factor 1, all at once on the drained queue ` +
        `while all ${CREW.drains + CREW.pulls} claimers run; ${crew.kills.length} SIGKILLs of workers mid-attempt (${cutAttempts} attempts cut), each replaced`,
      jobsLost: sum(lost),
      runTwiceAtOnce: twice.size,
      limitViolations: sum(violations) + countsOff,
      recovery:
        `the drains' pace ${paceDuring.toFixed(0)} jobs/s during the actions (${seconds(ended.ms - started.ms)}), ` +
        `${(paceDuring / paceAlone).toFixed(2)}× their ${paceAlone.toFixed(0)} jobs/s alone; every job ended ${seconds(settled.ms - started.ms)} after the actions began`,
      notes: [
        action(
          'cancel (one tenant, waiting)',
          cancel,
          ` (the drains claimed the rest: ${jobsOf('cancel', 'succeeded') + jobsOf('cancel', 'deleted succeeded')} run to success)`,
        ),
        action('redrive (into the drained queue)', redrive, `; each ran again and succeeded`),
        action('reschedule (one tenant, waiting, 2 s later)', reschedule),
        action(
          'delete over HTTP (succeeded, finished before the actions began)',
          remove,
          `, while the drains finished more`,
        ),
        `lost here: jobs neither cancelled nor completed, both, run after their cancel, redriven jobs not run again to success, ` +
          `jobs deleted that had not succeeded before the cut or whose events stayed (${sum(lost)}${lost.length > 0 ? `: ${lost.map((row) => `${row.jobs} ${row.role} ${row.verdict}`).join(', ')}` : ''})`,
        `limit violations here: bulk counts that disagree with the jobs the database shows changed (a dry run too, where nothing else moves its jobs) (${countsOff}), ` +
          `rescheduled jobs started before their new time, history left behind by the delete (${sum(violations)})`,
        `the drains' pace is the handlers' successful attempts per second (the killed workers' replacements start during the actions too), a figure, not a test (the issue asks for 0.7× or more)`,
      ],
    });

    expect(connected).toBe(CREW.drains + CREW.pulls);
    expect(crew.kills.length).toBe(KILLS);
    expect(lost.map((row) => `${row.jobs} ${row.role} ${row.ending}: ${row.verdict}`)).toEqual([]);
    // A rescheduled job started early: the reschedule and its attempts, as evidence.
    expect(await db.query({ text: startedEarlySql, params: [] })).toEqual([]);
    expect(violations.map((row) => `${row.jobs} ${row.role} ${row.ending}: ${row.verdict}`)).toEqual([]);
    expect(counts).toEqual({
      cancel: { changed: changed!.cancel, shown: changed!.cancel, cancelledJobs: changed!.cancel },
      cancelRequested: 0,
      redrive: { changed: DEAD, shown: DEAD, dryRun: DEAD, all: DEAD },
      reschedule: { changed: changed!.reschedule, shown: changed!.reschedule },
      delete: { changed: changed!.delete, shown: changed!.delete, dryRun: remove.result.matched },
    });
    expect([...twice]).toEqual([]);
    // The actions reached the drained queue's jobs while the drains ran: some of each tenant went each way.
    expect(counts.cancel.changed).toBeGreaterThan(0);
    expect(counts.reschedule.changed).toBeGreaterThan(0);
    expect(counts.delete.changed).toBeGreaterThan(HISTORY);
  });
});

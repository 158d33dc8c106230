import { setTimeout as sleep } from 'node:timers/promises';
import type { Db } from '../src/db/types';
import { percentile } from './stats';

/** A Worker to load, and its database to watch (every statement the Worker sends is one transaction). */
export interface WorkerTarget {
  api: string;
  headers: Record<string, string>;
  db: Db;
  transactions(): Promise<number>;
}

export interface BurnDown {
  jobs: number;
  /** Enqueueing the backlog, its queue paused: the serial batch requests' time. */
  enqueueSeconds: number;
  /** From the resume's send until the script saw every job finished (polled every 250 ms). */
  seconds: number;
  jobsPerSecond: number;
  /**
   * The drain's own pace: the jobs over the time from the first job's start
   * to the last one's end, on the database's clock. The polling's steps are
   * not in it.
   */
  drainJobsPerSecond: number;
  statementsPerJob: number;
}

/** Jobs of `queue` not finished yet; a read of the script's own, counted in `reads`. */
async function unfinished(target: WorkerTarget, queue: string, reads: { count: number }): Promise<number> {
  reads.count += 1;
  const [row] = await target.db.query<{ count: number }>({
    text: 'SELECT count(*)::int AS count FROM skiplock.jobs WHERE queue = $1',
    params: [queue],
  });
  return row!.count;
}

async function post(target: WorkerTarget, path: string, body?: unknown): Promise<void> {
  const response = await fetch(`${target.api}${path}`, {
    method: 'POST',
    headers: target.headers,
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  if (!response.ok) throw new Error(`POST ${path}: ${response.status} ${await response.text()}`);
  await response.body?.cancel();
}

/**
 * A burn-down: `jobs` copies of `job` enqueued in batches of 1,000 into a
 * paused queue, then the queue resumed (which starts a drain, as an enqueue
 * does) and timed until all have finished. The backlog is there before the
 * drain starts, so the drain's pace is not the enqueues' pace, which is one
 * round trip to the database per batch. Statements less the script's reads.
 */
export async function burnDown(
  target: WorkerTarget,
  queue: string,
  job: Record<string, unknown>,
  jobs: number,
): Promise<BurnDown> {
  const reads = { count: 0 };
  const before = await target.transactions();
  await post(target, `/v1/queues/${queue}/pause`);
  const enqueueStarted = performance.now();
  for (let sent = 0; sent < jobs; sent += 1000) {
    const batch = Array.from({ length: Math.min(1000, jobs - sent) }, () => job);
    await post(target, `/v1/queues/${queue}/jobs/batch`, { jobs: batch });
  }
  const started = performance.now();
  await post(target, `/v1/queues/${queue}/resume`);
  while ((await unfinished(target, queue, reads)) > 0) await sleep(250);
  const seconds = (performance.now() - started) / 1000;
  await sleep(2000);
  const statements = (await target.transactions()) - before - reads.count;
  const [drain] = await target.db.query<{ seconds: number }>({
    text: `SELECT extract(epoch FROM max(finished_at) - min(first_started_at))::float8 AS seconds
             FROM skiplock.all_jobs WHERE queue = $1`,
    params: [queue],
  });
  return {
    jobs,
    enqueueSeconds: round((started - enqueueStarted) / 1000),
    seconds: round(seconds),
    jobsPerSecond: Math.round(jobs / seconds),
    drainJobsPerSecond: Math.round(jobs / drain!.seconds),
    statementsPerJob: round(statements / jobs),
  };
}

export interface Burst {
  clients: number;
  seconds: number;
  enqueued: number;
  failed: number;
  enqueuesPerSecond: number;
  latencyMs: { p50: number; p99: number };
  enqueueToStartMs: { p50: number; p99: number };
}

/** `clients` clients enqueueing single no-op jobs for `seconds`: the rate, the latency, and enqueue to start once all ran. */
export async function enqueueBurst(
  target: WorkerTarget,
  queue: string,
  options: { clients: number; seconds: number },
): Promise<Burst> {
  const latencies: number[] = [];
  let enqueued = 0;
  let failed = 0;
  const until = performance.now() + options.seconds * 1000;
  await Promise.all(
    Array.from({ length: options.clients }, async () => {
      while (performance.now() < until) {
        const sent = performance.now();
        const response = await fetch(`${target.api}/v1/queues/${queue}/jobs`, {
          method: 'POST',
          headers: target.headers,
          body: JSON.stringify({ type: 'noop' }),
        });
        await response.arrayBuffer();
        if (response.status === 201) enqueued += 1;
        else failed += 1;
        latencies.push(performance.now() - sent);
      }
    }),
  );
  const reads = { count: 0 };
  while ((await unfinished(target, queue, reads)) > 0) await sleep(250);
  const [waits] = await target.db.query<{ p50: number; p99: number }>({
    text: `SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY ms) AS p50, percentile_cont(0.99) WITHIN GROUP (ORDER BY ms) AS p99
             FROM (SELECT extract(epoch FROM started_at - created_at) * 1000 AS ms FROM skiplock.all_jobs WHERE queue = $1) w`,
    params: [queue],
  });
  return {
    clients: options.clients,
    seconds: options.seconds,
    enqueued,
    failed,
    enqueuesPerSecond: Math.round(enqueued / options.seconds),
    latencyMs: { p50: round(percentile(latencies, 0.5)), p99: round(percentile(latencies, 0.99)) },
    enqueueToStartMs: { p50: round(waits!.p50), p99: round(waits!.p99) },
  };
}

export interface SerialEnqueues {
  requests: number;
  jobsPerRequest: number;
  latencyMs: { p50: number; p99: number };
  /** From sending the request to the job's start, each job enqueued on an idle system (after the one before finished). */
  sentToStartMs?: { p50: number; p99: number };
}

/**
 * One client sending `requests` enqueues one after another, each of
 * `jobsPerRequest` no-op jobs (a batch when more than one): the latency a
 * caller sees. With `untilFinished`, each waits for its job to finish before
 * the next is sent, so every job starts on an idle system, and the time from
 * the send to its start is measured too (Postgres and this process share the
 * machine's clock).
 */
export async function serialEnqueues(
  target: WorkerTarget,
  queue: string,
  options: { requests: number; jobsPerRequest: number; untilFinished?: boolean },
): Promise<SerialEnqueues> {
  const batch = options.jobsPerRequest > 1;
  const latencies: number[] = [];
  const sentToStart: number[] = [];
  for (let request = 0; request < options.requests; request += 1) {
    const sentAt = Date.now();
    const sent = performance.now();
    const response = await fetch(`${target.api}/v1/queues/${queue}/jobs${batch ? '/batch' : ''}`, {
      method: 'POST',
      headers: target.headers,
      body: JSON.stringify(
        batch ? { jobs: Array.from({ length: options.jobsPerRequest }, () => ({ type: 'noop' })) } : { type: 'noop' },
      ),
    });
    const answer = (await response.json()) as { id?: string };
    latencies.push(performance.now() - sent);
    if (response.status !== 201) throw new Error(`enqueue: ${response.status} ${JSON.stringify(answer)}`);
    if (options.untilFinished) {
      const id = answer.id!;
      for (;;) {
        const [job] = await target.db.query<{ started: number | null; finished: boolean }>({
          text: `SELECT extract(epoch FROM started_at) * 1000 AS started, finished_at IS NOT NULL AS finished
                   FROM skiplock.all_jobs WHERE id = $1`,
          params: [id],
        });
        if (job?.finished) {
          sentToStart.push(Number(job.started) - sentAt);
          break;
        }
        await sleep(2);
      }
    }
  }
  return {
    requests: options.requests,
    jobsPerRequest: options.jobsPerRequest,
    latencyMs: { p50: round(percentile(latencies, 0.5)), p99: round(percentile(latencies, 0.99)) },
    ...(options.untilFinished
      ? { sentToStartMs: { p50: round(percentile(sentToStart, 0.5)), p99: round(percentile(sentToStart, 0.99)) } }
      : {}),
  };
}

export const round = (value: number) => Math.round(value * 100) / 100;

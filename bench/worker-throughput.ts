/**
 * `npm run bench:worker`: jobs through `npm start`'s Worker alone (its cron
 * and fast-path drains in workerd over the Neon HTTP driver and the local
 * proxy; no Node worker), on a fresh database on DATABASE_URL's server, the
 * cron fired every second. Statements are that database's transactions
 * (pg_stat_database), less the script's own progress reads.
 *
 * 1. burn-down: JOBS no-op jobs enqueued in batches of 1,000, then until all finished;
 * 2. the same with jobs that wait 50 ms (I/O-bound);
 * 3. a burst: 64 clients enqueue single no-op jobs for 20 s: enqueue rate and
 *    latency, and enqueue-to-start of the jobs.
 *
 * Prints one JSON object; docs/benchmarks.md quotes it.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { percentile } from './stats';
import { startWorkerStack } from './worker-stack';

const jobs = Number(process.env.JOBS ?? 3000);

async function main(): Promise<void> {
  const stack = await startWorkerStack({ name: 'worker', drainEverySeconds: 1 });
  const { api, headers, transactions, db: target } = stack;
  try {
    let ownReads = 0;
    const unfinished = async (queue: string) => {
      ownReads += 1;
      const [row] = await target.query<{ count: number }>({
        text: 'SELECT count(*)::int AS count FROM skiplock.jobs WHERE queue = $1',
        params: [queue],
      });
      return row!.count;
    };

    async function burnDown(queue: string, job: Record<string, unknown>) {
      await sleep(3000);
      ownReads = 0;
      const before = await transactions();
      const started = performance.now();
      for (let sent = 0; sent < jobs; sent += 1000) {
        const batch = Array.from({ length: Math.min(1000, jobs - sent) }, () => job);
        const response = await fetch(`${api}/v1/queues/${queue}/jobs/batch`, { method: 'POST', headers, body: JSON.stringify({ jobs: batch }) });
        if (!response.ok) throw new Error(`batch enqueue: ${response.status} ${await response.text()}`);
      }
      while ((await unfinished(queue)) > 0) await sleep(250);
      const seconds = (performance.now() - started) / 1000;
      await sleep(2000);
      const statements = (await transactions()) - before - ownReads;
      return { jobs, seconds: round(seconds), jobsPerSecond: Math.round(jobs / seconds), statementsPerJob: round(statements / jobs) };
    }

    const noop = await burnDown('bench-noop', { type: 'noop' });
    console.error('no-op', noop);
    const io = await burnDown('bench-io', { type: 'sleep', payload: { ms: 50 } });
    console.error('I/O 50 ms', io);

    // The burst: 64 clients, single enqueues, 20 s.
    await sleep(3000);
    const latencies: number[] = [];
    const ids: string[] = [];
    let failures = 0;
    const until = performance.now() + 20_000;
    await Promise.all(
      Array.from({ length: 64 }, async () => {
        while (performance.now() < until) {
          const sent = performance.now();
          const response = await fetch(`${api}/v1/queues/bench-burst/jobs`, { method: 'POST', headers, body: JSON.stringify({ type: 'noop' }) });
          if (response.status !== 201) failures += 1;
          else ids.push(((await response.json()) as { id: string }).id);
          latencies.push(performance.now() - sent);
        }
      }),
    );
    while ((await unfinished('bench-burst')) > 0) await sleep(250);
    const [waits] = await target.query<{ p50: number; p99: number }>({
      text: `SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY ms) AS p50, percentile_cont(0.99) WITHIN GROUP (ORDER BY ms) AS p99
             FROM (SELECT extract(epoch FROM started_at - created_at) * 1000 AS ms FROM skiplock.all_jobs WHERE queue = 'bench-burst') w`,
      params: [],
    });
    const burst = {
      clients: 64,
      seconds: 20,
      enqueued: ids.length,
      failed: failures,
      enqueuesPerSecond: Math.round(ids.length / 20),
      latencyMs: { p50: round(percentile(latencies, 0.5)), p99: round(percentile(latencies, 0.99)) },
      enqueueToStartMs: { p50: round(waits!.p50), p99: round(waits!.p99) },
    };
    console.log(JSON.stringify({ noop, io50ms: io, burst }, null, 2));
  } finally {
    await stack.stop();
  }
}

const round = (value: number) => Math.round(value * 100) / 100;

await main();

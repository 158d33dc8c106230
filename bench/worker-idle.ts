/**
 * `npm run bench:idle`: what an idle queue costs its database under
 * `npm start` (the Worker in workerd with its queue clock, no Node worker).
 * The local stack runs against a fresh database on DATABASE_URL's server,
 * its drain fired every DRAIN_EVERY_SECONDS (10: six times the cadence of
 * the deployed cron), and the script counts that database's transactions
 * (every statement the Worker sends is one) from pg_stat_database:
 *
 * 1. idle: nothing due for IDLE_MINUTES (10), counted minute by minute;
 * 2. a job enqueued over HTTP with a 60 s delay: when it starts against its
 *    run time (on time means within one drain period), and what it cost;
 * 3. an enqueue of a job to run now: enqueue to start (the fast path).
 *
 * Prints one JSON object; docs/benchmarks.md quotes it.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { startWorkerStack, statementsPerIdleMinute } from './worker-stack';

const idleMinutes = Number(process.env.IDLE_MINUTES ?? 10);
const drainEverySeconds = Number(process.env.DRAIN_EVERY_SECONDS ?? 10);

async function main(): Promise<void> {
  const stack = await startWorkerStack({ name: 'idle', drainEverySeconds });
  const { api, headers, transactions } = stack;
  try {
    // The first ticks drain (the clock is new) and settle it; after that the queue is idle.
    await sleep(3 * drainEverySeconds * 1000);

    const perMinute = await statementsPerIdleMinute(transactions, idleMinutes, '');

    const beforeDelayed = await transactions();
    const enqueued = await fetch(`${api}/v1/queues/idle-bench/jobs`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ type: 'noop', delaySeconds: 60 }),
    });
    const { id } = (await enqueued.json()) as { id: string };
    // Read once it must have run (a status read is a statement too, so none before).
    await sleep(60_000 + 3 * drainEverySeconds * 1000);
    const delayedStatements = (await transactions()) - beforeDelayed;
    const delayed = await succeeded(api, headers, id);

    const beforeNow = await transactions();
    const ready = (await (
      await fetch(`${api}/v1/queues/idle-bench/jobs`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ type: 'noop' }),
      })
    ).json()) as { id: string };
    await sleep(3 * drainEverySeconds * 1000);
    const immediateStatements = (await transactions()) - beforeNow;
    const immediate = await succeeded(api, headers, ready.id);

    console.log(
      JSON.stringify(
        {
          drainEverySeconds,
          idleMinutes,
          idleStatementsPerMinute: perMinute,
          idleStatementsTotal: perMinute.reduce((sum, count) => sum + count, 0),
          delayedJob: {
            delaySeconds: 60,
            startedAfterRunAtMs: Date.parse(delayed.startedAt!) - Date.parse(delayed.runAt),
            statementsFromEnqueueToThreeTicksAfterRunAt: delayedStatements,
          },
          readyJob: {
            enqueueToStartMs: Date.parse(immediate.startedAt!) - Date.parse(immediate.createdAt),
            statementsFromEnqueueToThreeTicksLater: immediateStatements,
          },
        },
        null,
        2,
      ),
    );
  } finally {
    await stack.stop();
  }
}

interface JobJson {
  status: string;
  runAt: string;
  createdAt: string;
  startedAt: string | null;
}

async function succeeded(api: string, headers: Record<string, string>, id: string): Promise<JobJson> {
  const job = (await (await fetch(`${api}/v1/jobs/${id}`, { headers })).json()) as JobJson;
  if (job.status !== 'succeeded') throw new Error(`job ${id} is ${job.status}, not succeeded, when it should have run`);
  return job;
}

await main();

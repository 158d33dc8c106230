/**
 * `npx tsx bench/worker-idle-parked.ts`: bench:idle's idle measurement
 * (bench/worker-idle.ts) before and after parking jobs in the Worker's
 * database. `npm start` runs against a fresh database on DATABASE_URL's
 * server (default the system PostgreSQL), its drain fired every
 * DRAIN_EVERY_SECONDS (10); the script counts that database's transactions
 * (every statement the Worker sends is one) minute by minute:
 *
 * 1. IDLE_MINUTES (5) idle, nothing parked;
 * 2. PARKED_SLEEP (5,000) demo-workflow jobs sleeping a day, PARKED_EVENT
 *    (5,000) waiting for an event with a timeout a day ahead, and
 *    PARKED_CHILDREN (2,000) waiting for a child (run_at until_woken(), the
 *    child a noop job parked in a sleep of a day), in `default` and 10 other
 *    tenants, parked by the engine's step statements (bench/parked-seed.ts);
 *    then one noop job enqueued over HTTP, so a drain runs and settles the
 *    queue clock from the parked state, as the drain that parked them would;
 * 3. IDLE_MINUTES idle again, with the jobs parked.
 *
 * Prints one JSON object: statements per idle minute before and after, and
 * the next-due reading (src/engine/next-due.ts) the drain settles the clock with.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Db, SessionDb } from '../src/db/types';
import { nextDueAt } from '../src/engine/next-due';
import { parkedInventory, parkJobs } from './parked-seed';
import { startWorkerStack, statementsPerIdleMinute } from './worker-stack';

const idleMinutes = Number(process.env.IDLE_MINUTES ?? 5);
const drainEverySeconds = Number(process.env.DRAIN_EVERY_SECONDS ?? 10);
const parkedSleep = Number(process.env.PARKED_SLEEP ?? 5_000);
const parkedEvent = Number(process.env.PARKED_EVENT ?? 5_000);
const parkedChildren = Number(process.env.PARKED_CHILDREN ?? 2_000);
/** The job types `npm start` registers (the demo jobs); the next-due reading is taken for them. */
const WORKER_TYPES = ['noop', 'sleep', 'fail', 'demo-workflow'];
const TENANTS = ['default', ...[0, 1, 2, 3, 4].flatMap((n) => [`aaa-parked-${n}`, `zzz-parked-${n}`])];

function sessionDb(db: Db): SessionDb {
  if (!('withTransaction' in db)) throw new Error('the stack database has no interactive transactions');
  return db as SessionDb;
}

async function main(): Promise<void> {
  const stack = await startWorkerStack({ name: 'idle_parked', drainEverySeconds });
  const { api, headers, transactions } = stack;
  const db = sessionDb(stack.db);
  const idle = (label: string) => statementsPerIdleMinute(transactions, idleMinutes, `${label} `);
  const nextDue = async () => {
    const due = await nextDueAt(db, { types: WORKER_TYPES, retentionSeconds: 7 * 86_400 });
    // This read is a transaction of the database too: let its count reach pg_stat_database before a minute is counted.
    await sleep(5000);
    return due.toISOString();
  };
  try {
    // The first ticks drain (the clock is new) and settle it; after that the queue is idle.
    await sleep(3 * drainEverySeconds * 1000);
    const nextDueBefore = await nextDue();
    const before = await idle('nothing parked:');

    const startedParking = Date.now();
    // Just under a day: a wait's timeout may be at most MAX_WAIT_SECONDS ahead, and a day ahead is past the next midnight too.
    const until = new Date(Date.now() + 86_000_000);
    const common = { tenants: TENANTS, queue: 'idle-parked', type: 'demo-workflow', until };
    await parkJobs(db, { ...common, kind: 'sleep', count: parkedSleep }, 0);
    await parkJobs(db, { ...common, kind: 'event', count: parkedEvent }, parkedSleep);
    await parkJobs(
      db,
      {
        ...common,
        kind: 'children',
        count: parkedChildren,
        child: { queue: 'idle-parked', type: 'noop' },
      },
      parkedSleep + parkedEvent,
    );
    const inventory = await parkedInventory(db);
    const parkingSeconds = (Date.now() - startedParking) / 1000;
    console.error(`parked in ${parkingSeconds.toFixed(0)} s: ${JSON.stringify(inventory)}`);
    const enqueued = await fetch(`${api}/v1/queues/idle-bench/jobs`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ type: 'noop' }),
    });
    if (!enqueued.ok) throw new Error(`enqueue answered ${enqueued.status}`);
    await sleep(3 * drainEverySeconds * 1000);
    const nextDueAfter = await nextDue();
    const after = await idle('parked:');

    console.log(
      JSON.stringify(
        {
          drainEverySeconds,
          idleMinutes,
          parked: inventory,
          nextDue: { before: nextDueBefore, after: nextDueAfter, readAt: new Date().toISOString() },
          idleStatementsPerMinute: { nothingParked: before, parked: after },
          idleStatementsTotal: {
            nothingParked: before.reduce((sum, count) => sum + count, 0),
            parked: after.reduce((sum, count) => sum + count, 0),
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

await main();

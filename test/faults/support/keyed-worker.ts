/**
 * A claimer of the key scenarios (14 and 15), as a process for them to
 * SIGKILL mid-job: KEYED_MODE=drain runs drains one after another, as a
 * Worker's cron would (housekeeping, the reaper included, then the jobs until
 * none is claimable or the budget ends); KEYED_MODE=pull is a pull worker
 * (claim a few, run each, acknowledge each as it ends). Both run the one job
 * type `keyed` (support/keyed-ledger.ts), which notes each attempt in the
 * side-effect ledger.
 * Environment: DATABASE_URL, WORKER_ID, KEYED_MODE.
 */
import { pgDb } from '../../../src/db/pg';
import { drainOnce } from '../../../src/drain/drain-once';
import type { Logger } from '../../../src/drain/logger';
import { createRegistry } from '../../../src/drain/registry';
import { claimBatch, completeMany, failMany } from '../../../src/engine';
import { sleep } from '../../../src/engine/sleep';
import { KEYED_TYPE, keyedJob, keyedPayload, runKeyedAttempt } from './keyed-ledger';

const workerId = process.env.WORKER_ID!;
// Named after the worker, so the scenario sees when each is connected.
const url = new URL(process.env.DATABASE_URL!);
url.searchParams.set('application_name', workerId);
const databaseUrl = url.toString();
/** Attempts a claimer runs at once. */
const CONCURRENCY = 4;

const quiet: Logger = {
  info: () => {},
  warn: (message) => console.error(`${workerId} warn: ${message}`),
  error: (message) => console.error(`${workerId} error: ${message}`),
};

const db = pgDb(databaseUrl, { max: CONCURRENCY + 1 });
const ledger = pgDb(databaseUrl, { max: CONCURRENCY });

async function drains(): Promise<never> {
  const registry = createRegistry([keyedJob(ledger, workerId)]);
  for (;;) {
    try {
      await drainOnce(db, registry, { budgetSeconds: 3, concurrency: CONCURRENCY, workerId, logger: quiet });
    } catch (error) {
      console.error(`${workerId}: ${(error as Error).message}`);
    }
    await sleep(50);
  }
}

async function pulls(): Promise<never> {
  const running = new Set<Promise<void>>();
  for (;;) {
    try {
      const free = CONCURRENCY - running.size;
      const claimed = free > 0 ? await claimBatch(db, { max: free, workerId, types: [KEYED_TYPE] }) : [];
      for (const job of claimed) {
        const run = (async () => {
          const failure = await runKeyedAttempt(
            ledger,
            { id: job.id, attempt: job.attempts, workerId },
            keyedPayload.parse(job.payload),
          ).then(
            () => undefined,
            (error: unknown) => error as Error,
          );
          try {
            if (failure === undefined) await completeMany(db, [job]);
            else await failMany(db, [{ id: job.id, leaseToken: job.leaseToken, error: { message: failure.message } }]);
          } catch (error) {
            console.error(`${workerId}: ${(error as Error).message}`);
          }
        })();
        running.add(run);
        void run.finally(() => running.delete(run));
      }
      await sleep(claimed.length === 0 ? 25 : 5);
    } catch (error) {
      console.error(`${workerId}: ${(error as Error).message}`);
      await sleep(200);
    }
  }
}

await (process.env.KEYED_MODE === 'pull' ? pulls() : drains());

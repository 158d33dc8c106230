import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { pgDb } from '../../src/db/pg';
import { sleep } from '../../src/engine/sleep';
import { runHistory, untilAllSucceeded } from './support/history';
import { enqueueMany, jobs } from './support/load';
import { fetchPastDevProxyDrops, STACK_ADMIN_TOKEN, workerStackPerFile, type WorkerStack } from './support/local-stack';
import { processes } from './support/processes';
import { recordScenario, seconds } from './support/report';

const spawn = processes(join(tmpdir(), `skiplock-faults-restart-${process.pid}.log`));

const BACKLOG = 400;
const CLIENTS = 3;
const OUTAGE_MS = 4000;

interface Answer {
  atMs: number;
  status: number;
  contentType: string | null;
  problemType?: string;
  id?: string;
}

/** One enqueue over HTTP; a refused connection would be a failed request, which must not happen either. */
async function enqueueOverHttp(stack: WorkerStack, i: number, devProxyDrops: { count: number }): Promise<Answer> {
  const response = await fetchPastDevProxyDrops(
    `${stack.url}/v1/queues/restart/jobs`,
    {
      method: 'POST',
      headers: { authorization: `Bearer ${STACK_ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ type: 'noop', payload: { i } }),
    },
    devProxyDrops,
  );
  const body = (await response.json()) as { id?: string; type?: string };
  const answer: Answer = {
    atMs: Date.now(),
    status: response.status,
    contentType: response.headers.get('content-type'),
  };
  return response.status === 201 ? { ...answer, id: body.id! } : { ...answer, problemType: body.type! };
}

describe('scenario 2: Postgres stopped and started during drains and HTTP enqueues', () => {
  const workerStack = workerStackPerFile();

  it('enqueues succeed or answer 503 problem+json, none acknowledged is lost, draining resumes by itself', {
    timeout: 240_000,
  }, async () => {
    const { postgres, stack } = await workerStack.start();
    const db = pgDb(postgres.url, { max: 2 });
    await enqueueMany(
      db,
      jobs(BACKLOG, () => ({ queue: 'restart', type: 'sleep', payload: { ms: 100 }, leaseSeconds: 2 })),
    );
    await spawn.nodeWorker(postgres.url, 'node-restart', { WORKER_CONCURRENCY: '4', POLL_INTERVAL_MS: '100' });

    const answers: Answer[] = [];
    const devProxyDrops = { count: 0 };
    let enqueuing = true;
    let sent = 0;
    const clients = Array.from({ length: CLIENTS }, async () => {
      while (enqueuing) {
        answers.push(await enqueueOverHttp(stack, sent++, devProxyDrops));
        await sleep(20);
      }
    });

    await sleep(3000);
    const stoppedAt = Date.now();
    await postgres.stop();
    await sleep(OUTAGE_MS);
    await postgres.start();
    const restartedAt = Date.now();
    await sleep(4000);
    enqueuing = false;
    await Promise.all(clients);

    const acknowledged = answers.filter((answer) => answer.status === 201).map((answer) => answer.id!);
    const counts = await untilAllSucceeded(db, 90_000);
    const found = await db.query<{ id: string; state: string }>({
      text: 'SELECT id, state FROM skiplock.all_jobs WHERE id = ANY($1::uuid[])',
      params: [acknowledged],
    });
    const history = await runHistory(db);
    const [firstCompletion] = await db.query<{ atMs: number | null }>({
      text: 'SELECT extract(epoch FROM min(finished_at))::float8 * 1000 AS "atMs" FROM skiplock.finished_jobs WHERE state = \'succeeded\' AND finished_at > to_timestamp($1 / 1000.0)',
      params: [restartedAt],
    });
    await db.close();

    const byStatus = new Map<number, number>();
    for (const { status } of answers) byStatus.set(status, (byStatus.get(status) ?? 0) + 1);
    const unavailable = answers.filter((answer) => answer.status === 503);
    const firstAcceptedAfter = answers.find((answer) => answer.status === 201 && answer.atMs > restartedAt);
    const other = answers.filter((answer) => answer.status !== 201 && answer.status !== 503);
    await recordScenario({
      scenario: 2,
      name: 'Database restart during drains and HTTP enqueues',
      load: `${BACKLOG} sleep jobs draining (1 Node worker × 4, Worker cron drains every 1 s) + ${CLIENTS} HTTP clients enqueuing through wrangler dev and the Neon proxy`,
      faults: `Postgres stopped for ${seconds(restartedAt - stoppedAt)} and started again, mid-drain and mid-enqueue`,
      jobsLost: acknowledged.length - found.length + (counts.total - counts.succeeded),
      runTwiceAtOnce: history.runTwiceAtOnce.length,
      limitViolations: 0,
      recovery: `first enqueue accepted ${firstAcceptedAfter ? seconds(firstAcceptedAfter.atMs - restartedAt) : 'never'}, first job completed ${firstCompletion?.atMs ? seconds(firstCompletion.atMs - restartedAt) : 'never'} after Postgres was back`,
      notes: [
        `HTTP answers: ${[...byStatus].map(([status, count]) => `${count} × ${status}`).join(', ')}`,
        `every 503 is application/problem+json: ${unavailable.every((answer) => answer.contentType === 'application/problem+json')}; types: ${[...new Set(unavailable.map((answer) => answer.problemType))].join(', ') || 'none'}`,
        `${acknowledged.length} acknowledged enqueues, ${found.length} found afterwards; ${counts.succeeded} of ${counts.total} jobs succeeded`,
        `drains that failed while Postgres was down: ${stack.drainFailures.length}`,
        `requests wrangler dev's proxy dropped before the Worker, sent again: ${devProxyDrops.count}`,
      ],
    });

    expect(other).toEqual([]);
    expect(unavailable.length).toBeGreaterThan(0);
    expect(unavailable.every((answer) => answer.contentType === 'application/problem+json')).toBe(true);
    expect(found).toHaveLength(acknowledged.length);
    expect(counts.succeeded).toBe(counts.total);
    expect(history.runTwiceAtOnce).toEqual([]);
    expect(firstAcceptedAfter).toBeDefined();
  });
});

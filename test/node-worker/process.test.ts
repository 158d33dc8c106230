import { spawn, type ChildProcess } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import type { Db } from '../../src/db/types';
import { z } from 'zod';
import { defineJob } from '../../src/drain/define-job';
import { enqueueBatch } from '../../src/engine';
import { engineDatabases } from '../support/engine-db';
import { waitFor } from '../support/wait-for';
import { drain } from '../drain/support/drain';

const open = engineDatabases();
const started: ChildProcess[] = [];

/** `npm run work` in its own process group, so a test can end the whole group it started. */
function spawnWorker(
  databaseUrl: string,
  env: Record<string, string>,
): ChildProcess & { exited: Promise<number | null> } {
  const child = spawn('npm', ['run', '--silent', 'work'], {
    env: { ...process.env, DATABASE_URL: databaseUrl, SKIPLOCK_DEV: '1', POLL_INTERVAL_MS: '100', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  started.push(child);
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return Object.assign(child, { exited });
}

afterEach(() => {
  for (const child of started.splice(0)) {
    if (child.exitCode === null && child.signalCode === null) process.kill(-child.pid!, 'SIGKILL');
  }
});

async function states(db: Db): Promise<Record<string, number>> {
  const rows = await db.query<{ state: string; count: number }>({
    text: 'SELECT state, count(*)::integer AS count FROM skiplock.all_jobs GROUP BY state',
    params: [],
  });
  return Object.fromEntries(rows.map((row) => [row.state, row.count]));
}

async function untilRunning(db: Db, count: number): Promise<void> {
  await waitFor(`${count} jobs running`, async () => ((await states(db)).running ?? 0) >= count, { everyMs: 20 });
}

describe('npm run work', () => {
  it('on SIGTERM stops claiming, finishes or hands back what runs, and exits 0: nothing left running, nothing lost', async () => {
    const { db, url } = await open('pg');
    const worker = spawnWorker(url, { WORKER_CONCURRENCY: '3', SHUTDOWN_GRACE_SECONDS: '2' });
    await enqueueBatch(db, [
      { queue: 'demo', type: 'sleep', payload: { ms: 600 } },
      { queue: 'demo', type: 'sleep', payload: { ms: 600 } },
      { queue: 'demo', type: 'sleep', payload: { ms: 60_000 } },
      ...Array.from({ length: 5 }, () => ({ queue: 'demo', type: 'sleep', payload: { ms: 600 } })),
    ]);
    await untilRunning(db, 3);

    worker.kill('SIGTERM');

    expect(await worker.exited).toBe(0);
    const after = await states(db);
    expect(after.running).toBeUndefined();
    expect(after.failed).toBeUndefined();
    expect((after.succeeded ?? 0) + (after.queued ?? 0) + (after.scheduled ?? 0)).toBe(8);
    const [endless] = await db.query<{ state: string; attempts: number }>({
      text: 'SELECT state, attempts FROM skiplock.all_jobs WHERE payload = \'{"ms": 60000}\'',
      params: [],
    });
    expect(endless).toEqual({ state: 'scheduled', attempts: 0 });
  });

  it('killed with SIGKILL mid-job: its jobs run again after their leases expire, none lost', async () => {
    const { db, url } = await open('pg');
    const worker = spawnWorker(url, { WORKER_CONCURRENCY: '4' });
    // Jobs the worker holds running until it is killed; the drains after it run their type at once.
    await enqueueBatch(
      db,
      Array.from({ length: 4 }, () => ({ queue: 'demo', type: 'sleep', payload: { ms: 600_000 }, leaseSeconds: 1 })),
    );
    await untilRunning(db, 4);

    process.kill(-worker.pid!, 'SIGKILL');
    await worker.exited;
    expect((await states(db)).running).toBe(4);

    const quickSleep = defineJob('sleep', z.unknown(), () => ({ ok: true }));
    await waitFor(
      "the killed worker's jobs to run again once their leases expired",
      async () => {
        await drain(db, [quickSleep]);
        return (await states(db)).succeeded === 4;
      },
      { everyMs: 200 },
    );
    expect(await states(db)).toEqual({ succeeded: 4 });
    const [events] = await db.query<{ expired: number }>({
      text: "SELECT count(*)::integer AS expired FROM skiplock.job_events WHERE kind = 'lease_expired'",
      params: [],
    });
    expect(events!.expired).toBe(4);
  });
});

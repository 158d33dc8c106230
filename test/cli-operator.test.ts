import { execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { rm } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { anyFreePort } from '../src/local/ports';
import { compileCli, type CompiledCli } from './support/compiled-cli';
import { projectRoot } from './support/repository-root';
import { createTestDatabase, type TestDatabase } from './support/database';
import { npmStart, scratchCheckout, type NpmStart } from './support/npm-start';
import { waitFor } from './support/wait-for';

const ADMIN = 'cli-operator-admin';

interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

interface JobJson {
  id: string;
  status: string;
  queue: string;
  tenant: string;
  attempts: number;
  lastError: unknown;
}

/**
 * The operator commands of the package's CLI (src/cli/main.ts, the bin's
 * source, compiled once for the file as dist/ is: test/support/compiled-cli.ts)
 * against the API of a running `npm start`, with SKIPLOCK_URL and
 * SKIPLOCK_API_KEY as an operator sets them.
 */
describe('skiplock jobs, queues, stats, tenants and keys against npm start', () => {
  let checkout: string;
  let database: TestDatabase;
  let cli: CompiledCli;
  let stack: NpmStart;
  let url: string;

  /** Runs the CLI with the stack's URL and admin key in its environment, unless `env` says otherwise. */
  async function skiplock(args: string[], env: Record<string, string | undefined> = {}): Promise<CliRun> {
    const { SKIPLOCK_URL: _url, SKIPLOCK_API_KEY: _key, ...inherited } = process.env;
    const merged = { ...inherited, SKIPLOCK_URL: url, SKIPLOCK_API_KEY: ADMIN, ...env };
    const defined = Object.fromEntries(Object.entries(merged).filter(([, value]) => value !== undefined));
    try {
      const { stdout, stderr } = await promisify(execFile)(process.execPath, [cli.main, ...args], {
        cwd: projectRoot,
        env: defined,
      });
      return { code: 0, stdout, stderr };
    } catch (error) {
      const failed = error as { code: number; stdout: string; stderr: string };
      return { code: failed.code, stdout: failed.stdout, stderr: failed.stderr };
    }
  }

  /** A failed run printed one line on stderr, naming the cause, and no stack trace. */
  function expectOneLine(run: CliRun, code: number, message: RegExp): void {
    expect({ code: run.code, lines: run.stderr.trimEnd().split('\n') }).toEqual({
      code,
      lines: [expect.stringMatching(message)],
    });
  }

  async function enqueue(queue: string, body: Record<string, unknown>): Promise<JobJson> {
    const response = await fetch(`${url}/v1/queues/${queue}/jobs`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    expect(response.status).toBe(201);
    return (await response.json()) as JobJson;
  }

  /** Claims the next job of a type only the test runs, as a pull worker would: it stays running until the test completes it. */
  async function claim(queue: string, type: string): Promise<JobJson & { leaseToken: string }> {
    const response = await fetch(`${url}/v1/queues/${queue}/claim`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ workerId: 'cli-test', types: [type], leaseSeconds: 300 }),
    });
    const [job] = ((await response.json()) as { jobs: Array<JobJson & { leaseToken: string }> }).jobs;
    if (job === undefined) throw new Error(`no ${type} job to claim in ${queue}`);
    return job;
  }

  async function complete(job: { id: string; leaseToken: string }): Promise<void> {
    const response = await fetch(`${url}/v1/jobs/${job.id}/complete`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ leaseToken: job.leaseToken, result: { done: 'by the test' } }),
    });
    expect(response.status).toBe(200);
  }

  beforeAll(async () => {
    [checkout, database, cli] = await Promise.all([
      scratchCheckout(),
      createTestDatabase({ migrated: false }),
      compileCli(),
    ]);
    const port = await anyFreePort();
    stack = await npmStart(checkout, {
      DATABASE_URL: database.url,
      PORT: String(port),
      ADMIN_TOKEN: ADMIN,
      DRAIN_EVERY_SECONDS: '1',
    });
    expect(stack.output()).toContain('Ctrl-C stops everything');
    url = `http://127.0.0.1:${port}`;
  }, 120_000);
  afterAll(async () => {
    await stack?.stop();
    await database?.drop();
    await cli?.remove();
    if (checkout) await rm(checkout, { recursive: true, force: true });
  });

  it('jobs list filters by queue, tenant and status, and pages with --cursor', async () => {
    // A type nothing runs, so the jobs stay queued.
    for (const tenant of ['acme', 'acme', 'acme', 'globex']) await enqueue('cli-list', { type: 'cli-idle', tenant });

    const first = await skiplock([
      'jobs',
      'list',
      '--queue',
      'cli-list',
      '--tenant',
      'acme',
      '--status',
      'queued',
      '--limit',
      '2',
      '--json',
    ]);
    const page1 = JSON.parse(first.stdout) as { jobs: JobJson[]; nextCursor: string | null };
    expect(page1.jobs.map((job) => [job.queue, job.tenant, job.status])).toEqual([
      ['cli-list', 'acme', 'queued'],
      ['cli-list', 'acme', 'queued'],
    ]);
    expect(page1.nextCursor).toEqual(expect.any(String));
    const second = await skiplock([
      'jobs',
      'list',
      '--queue',
      'cli-list',
      '--tenant',
      'acme',
      '--limit',
      '2',
      '--cursor',
      page1.nextCursor!,
      '--json',
    ]);
    const page2 = JSON.parse(second.stdout) as { jobs: JobJson[]; nextCursor: string | null };
    expect(page2).toMatchObject({ jobs: [{ tenant: 'acme' }], nextCursor: null });
    expect(new Set([...page1.jobs, ...page2.jobs].map((job) => job.id)).size).toBe(3);

    const human = await skiplock(['jobs', 'list', '--queue', 'cli-list', '--limit', '3']);
    const lines = human.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^ID +QUEUE +TYPE +TENANT +STATUS +ATTEMPTS +CREATED +TAGS$/);
    expect(lines.slice(1, 4)).toEqual(
      Array(3).fill(expect.stringMatching(/^[0-9a-f-]{36} +cli-list +cli-idle +(acme|globex) +queued +0\/5 +\d{4}-/)),
    );
    expect(lines[4]).toMatch(/^more: add --cursor \S+$/);
    expect({ code: human.code, stderr: human.stderr }).toEqual({ code: 0, stderr: '' });
  });

  it('jobs list and jobs bulk filter by --tag (all of them) and --payload; a bad one is refused in one line', async () => {
    const eu = await enqueue('cli-tags', {
      type: 'cli-idle',
      tags: ['batch:7', 'env=prod'],
      payload: { region: 'eu' },
    });
    const us = await enqueue('cli-tags', { type: 'cli-idle', tags: ['batch:7'], payload: { region: 'us' } });
    const listed = async (...flags: string[]) =>
      (
        JSON.parse((await skiplock(['jobs', 'list', '--queue', 'cli-tags', ...flags, '--json'])).stdout) as {
          jobs: JobJson[];
        }
      ).jobs.map((job) => job.id);
    expect(await listed('--tag', 'batch:7')).toEqual([us.id, eu.id]);
    expect(await listed('--tag', 'batch:7', '--tag', 'env=prod')).toEqual([eu.id]);
    expect(await listed('--payload', '{"region":"us"}')).toEqual([us.id]);
    const human = await skiplock(['jobs', 'list', '--queue', 'cli-tags', '--tag', 'env=prod']);
    expect(human.stdout.split('\n')[1]).toMatch(/ batch:7 env=prod$/);

    expect(
      await skiplock([
        'jobs',
        'bulk',
        'cancel',
        '--queue',
        'cli-tags',
        '--tag',
        'batch:7',
        '--payload',
        '{"region":"eu"}',
      ]),
    ).toMatchObject({ code: 0, stdout: 'cancel: 1 of 1 matching job changed\n' });
    expect(await listed('--status', 'cancelled')).toEqual([eu.id]);

    expectOneLine(
      await skiplock(['jobs', 'list', '--tag', 'no spaces']),
      1,
      /^skiplock jobs: 400 .*\(tag: a tag is 1 to 64/,
    );
    expectOneLine(
      await skiplock(['jobs', 'list', '--payload', '[1]']),
      1,
      /^skiplock jobs: 400 .*\(payload: must be a JSON object/,
    );
    expectOneLine(
      await skiplock(['jobs', 'bulk', 'cancel', '--payload', '"eu"']),
      2,
      /^skiplock jobs: --payload must be a JSON object the payload contains/,
    );
    expect(await listed('--status', 'cancelled')).toEqual([eu.id]);
  });

  it('jobs get prints a job; --wait follows it to its end: exit 0 succeeded, 6 failed, 7 past --timeout', async () => {
    const quick = await enqueue('cli-wait', { type: 'noop' });
    const succeeded = await skiplock(['jobs', 'get', quick.id, '--wait', '--json']);
    expect(succeeded.code).toBe(0);
    expect(JSON.parse(succeeded.stdout)).toMatchObject({ id: quick.id, status: 'succeeded', result: { ok: true } });

    const doomed = await enqueue('cli-wait', { type: 'fail', payload: { times: 5 }, maxAttempts: 1 });
    const failed = await skiplock(['jobs', 'get', doomed.id, '--wait']);
    expect(failed.stdout).toMatch(new RegExp(`^id +${doomed.id}\\nstatus +failed\\n`));
    expectOneLine(failed, 6, new RegExp(`^skiplock jobs: job ${doomed.id} ended failed: .*planned failure 1 of 5`));

    const idle = await enqueue('cli-wait', { type: 'cli-idle' });
    expectOneLine(
      await skiplock(['jobs', 'get', idle.id, '--wait', '--timeout', '1']),
      7,
      /is still queued after 1 s$/,
    );
    const plain = await skiplock(['jobs', 'get', idle.id]);
    expect(plain.stdout).toMatch(/^id +\S+\nstatus +queued\nqueue +cli-wait\n/);
  });

  it('jobs get --wait keeps a live status line on a terminal, and writes none for a script', async () => {
    // The job runs in the test's hands (claimed over the pull API, a type nothing else runs) until the CLI showed it running.
    const held = await enqueue('cli-live', { type: 'cli-held' });
    const claimed = await claim('cli-live', 'cli-held');
    expect(claimed.id).toBe(held.id);
    // `script` runs the command on a pseudo-terminal and copies what it wrote there to its stdout.
    const command = `${process.execPath} ${cli.main} jobs get ${held.id} --wait`;
    const onTerminal = spawn('script', ['-qec', command, '/dev/null'], {
      cwd: projectRoot,
      env: { ...process.env, SKIPLOCK_URL: url, SKIPLOCK_API_KEY: ADMIN },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const exited = once(onTerminal, 'exit');
    let terminal = '';
    onTerminal.stdout.on('data', (chunk: Buffer) => (terminal += chunk.toString()));
    const statusLine = new RegExp(`\\r\\x1b\\[2Kjob ${held.id}: running, attempt 1 of 5, \\d+ s`);
    await waitFor(
      'the CLI on a terminal to show the job running',
      () => statusLine.test(terminal) || onTerminal.exitCode !== null,
    );
    await complete(claimed);
    expect((await exited)[0]).toBe(0);
    expect(terminal).toMatch(statusLine);
    expect(terminal).toMatch(/status +succeeded/);

    // Off a terminal: the CLI, past its --timeout, saw the job running and still wrote no status line, only its one error line.
    const again = await enqueue('cli-live', { type: 'cli-held' });
    const running = await claim('cli-live', 'cli-held');
    const timedOut = await skiplock(['jobs', 'get', again.id, '--wait', '--timeout', '1']);
    expectOneLine(timedOut, 7, new RegExp(`^skiplock jobs: job ${again.id} is still running after 1 s$`));
    expect(timedOut.stdout + timedOut.stderr).not.toContain('\x1b');
    await complete(running);
    const piped = await skiplock(['jobs', 'get', again.id, '--wait']);
    expect({ code: piped.code, stderr: piped.stderr, stdout: piped.stdout }).toEqual({
      code: 0,
      stderr: '',
      stdout: expect.stringMatching(/status +succeeded/),
    });
  });

  it('jobs retry and jobs cancel change the job; a finished job cannot be cancelled', async () => {
    const doomed = await enqueue('cli-ops', { type: 'fail', payload: { times: 5 }, maxAttempts: 1 });
    await skiplock(['jobs', 'get', doomed.id, '--wait']);
    const retried = await skiplock(['jobs', 'retry', doomed.id]);
    expect(retried).toEqual({
      code: 0,
      stdout: `job ${doomed.id} is queued again, with 1 fresh attempt\n`,
      stderr: '',
    });

    const idle = await enqueue('cli-ops', { type: 'cli-idle' });
    const cancelled = await skiplock(['jobs', 'cancel', idle.id, '--json']);
    expect(JSON.parse(cancelled.stdout)).toMatchObject({ id: idle.id, status: 'cancelled' });
    expectOneLine(
      await skiplock(['jobs', 'cancel', idle.id]),
      1,
      /^skiplock jobs: 409 Already finished: the job already ended cancelled$/,
    );
  });

  it('jobs bulk counts with --dry-run, then acts on every job of the filter; no filter or an unknown action is refused', async () => {
    for (let i = 0; i < 3; i++) await enqueue('cli-bulk', { type: 'cli-idle', delaySeconds: 3600 });
    expect(await skiplock(['jobs', 'bulk', 'cancel', '--queue', 'cli-bulk', '--dry-run'])).toEqual({
      code: 0,
      stdout: 'cancel would take 3 jobs (3 scheduled); nothing changed (dry run)\n',
      stderr: '',
    });
    expect((await skiplock(['jobs', 'bulk', 'cancel', '--queue', 'cli-bulk'])).stdout).toBe(
      'cancel: 3 of 3 matching jobs changed\n',
    );
    const retried = await skiplock(['jobs', 'bulk', 'retry', '--queue', 'cli-bulk', '--status', 'cancelled', '--json']);
    expect(JSON.parse(retried.stdout)).toMatchObject({ action: 'retry', matched: 3, changed: 3, nextCursor: null });
    expectOneLine(await skiplock(['jobs', 'bulk', 'cancel']), 1, /^skiplock jobs: 400 .*all: true/);
    expectOneLine(await skiplock(['jobs', 'bulk', 'purge', '--all']), 2, /ACTION must be one of retry, cancel/);
  });

  it('jobs reschedule moves a waiting job; workers release hands back what a worker holds', async () => {
    const idle = await enqueue('cli-moves', { type: 'cli-idle' });
    const later = await skiplock(['jobs', 'reschedule', idle.id, '--priority', '5', '--delay', '3600', '--json']);
    expect(later.code).toBe(0);
    expect(JSON.parse(later.stdout)).toMatchObject({ id: idle.id, status: 'scheduled', priority: 5 });
    const now = await skiplock(['jobs', 'reschedule', idle.id, '--delay', '0']);
    expect(now.stdout).toMatch(new RegExp(`^job ${idle.id} is queued, priority 5, to run at `));
    expectOneLine(await skiplock(['jobs', 'reschedule', idle.id]), 2, /give --priority, --run-at or --delay$/);
    expectOneLine(
      await skiplock(['jobs', 'reschedule', idle.id, '--priority', 'high']),
      2,
      /--priority must be a whole number, not "high"$/,
    );
    expectOneLine(await skiplock(['jobs', 'reschedule', idle.id, '--priority', '5000']), 1, /^skiplock jobs: 400 /);

    // The worker's own key, bound to its id: it claims under that id, and it alone may hand back what the id holds.
    const created = await skiplock([
      'keys',
      'create',
      '--name',
      'cli-crashed',
      '--scope',
      'worker',
      '--worker-id',
      'cli-crashed',
      '--json',
    ]);
    const workerKey = (JSON.parse(created.stdout) as { secret: string }).secret;
    const claim = await fetch(`${url}/v1/queues/cli-moves/claim`, {
      method: 'POST',
      headers: { authorization: `Bearer ${workerKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ workerId: 'cli-crashed', types: ['cli-idle'] }),
    });
    expect(((await claim.json()) as { jobs: JobJson[] }).jobs.map((job) => job.id)).toEqual([idle.id]);
    expectOneLine(
      await skiplock(['jobs', 'reschedule', idle.id, '--priority', '1']),
      1,
      /^skiplock jobs: 409 Not waiting: the job is running/,
    );
    expectOneLine(
      await skiplock(['workers', 'release', 'cli-crashed']),
      4,
      /^skiplock workers: 403 Forbidden: only a key bound to worker cli-crashed /,
    );
    const released = await skiplock(['workers', 'release', 'cli-crashed'], { SKIPLOCK_API_KEY: workerKey });
    expect(released).toEqual({
      code: 0,
      stdout: `handed back 1 job of worker cli-crashed: ${idle.id} queued\n`,
      stderr: '',
    });
    expect((await skiplock(['workers', 'release', 'cli-crashed'], { SKIPLOCK_API_KEY: workerKey })).stdout).toBe(
      'worker cli-crashed holds no jobs\n',
    );
  });

  it('queues and stats count the jobs per queue, tenant and status', async () => {
    await enqueue('cli-counts', { type: 'cli-idle', tenant: 'initech' });
    const queues = await skiplock(['queues']);
    expect(queues.stdout).toMatch(
      /^QUEUE +SCHEDULED +QUEUED +RUNNING +RETRYING +SUCCEEDED +FAILED +CANCELLED +EXPIRED +OLDEST WAIT +HELD +DEBOUNCED +CAP +RATE +WEIGHT +DELIVERY +PAUSED\n/,
    );
    expect(queues.stdout).toMatch(/\ncli-counts +0 +1 +0 +0 +0 +0 +0 +0 +\S.* +0 +0 +- +- +1 +- +-\n/);
    const json = JSON.parse((await skiplock(['queues', '--json'])).stdout) as {
      queues: Array<{ queue: string; counts: object }>;
    };
    expect(json.queues.find((queue) => queue.queue === 'cli-counts')?.counts).toMatchObject({ queued: 1 });

    const stats = await skiplock(['stats']);
    expect(stats.stdout).toMatch(/\ncli-counts +initech +queued +1 +/);
    expect(stats.stdout).toMatch(/\nexpired leases reaped +\d+ in the last hour\n/);
    const statsJson = JSON.parse((await skiplock(['stats', '--json'])).stdout) as { stats: unknown[]; health: object };
    expect(statsJson.stats).toContainEqual(
      expect.objectContaining({ queue: 'cli-counts', tenant: 'initech', status: 'queued', count: 1 }),
    );
    expect(statsJson.health).toHaveProperty('expiredLeasesReaped');
  });

  it('concurrency-keys lists the keys in use and unblocks only a held one', async () => {
    await enqueue('cli-keyed', { type: 'cli-idle', tenant: 'hooli', concurrencyKey: 'cli-account' });
    await enqueue('cli-keyed', { type: 'cli-idle', tenant: 'hooli', concurrencyKey: 'cli-account' });
    const listed = await skiplock(['concurrency-keys', 'list', '--tenant', 'hooli']);
    expect(listed.stdout).toMatch(/^TENANT +KEY +KIND +TAKEN +HELD +BLOCKED\n/);
    expect(listed.stdout).toMatch(/\nhooli +cli-account +concurrency +1\/1 +1 +-\n/);
    expect((await skiplock(['queues'])).stdout).toMatch(/\ncli-keyed +0 +2 +.* +1 +0 +- +- +1 +- +-\n/);
    const unblock = await skiplock(['concurrency-keys', 'unblock', 'cli-account', '--tenant', 'hooli']);
    expect(unblock).toMatchObject({ code: 0, stdout: 'cli-account: not held; nothing changed\n' });
    expect((await skiplock(['concurrency-keys', 'list', '--blocked'])).stdout).toBe('no key is held by a failed job\n');
    const missing = await skiplock(['concurrency-keys', 'unblock']);
    expect(missing.code).not.toBe(0);
    expect(missing.stderr.trim().split('\n')).toHaveLength(1);
  });

  it('tenants set changes the settings given and keeps the others; tenants get shows them', async () => {
    const set = await skiplock(['tenants', 'set', 'cli-tenant', '--concurrency', '2', '--rate-limit', '10/60']);
    expect(set.stdout).toMatch(
      /^tenant +cli-tenant\nconcurrency +2 running at once\nrate limit +10 started per 60 s\nweight +1\n/,
    );
    await skiplock(['tenants', 'set', 'cli-tenant', '--weight', '3']);
    const got = await skiplock(['tenants', 'get', 'cli-tenant', '--json']);
    expect(JSON.parse(got.stdout)).toEqual({
      name: 'cli-tenant',
      concurrency: 2,
      rateLimit: { count: 10, perSeconds: 60 },
      weight: 3,
      custom: true,
      running: 0,
    });
    const unlimited = await skiplock([
      'tenants',
      'set',
      'cli-tenant',
      '--concurrency',
      'none',
      '--rate-limit',
      'none',
      '--json',
    ]);
    expect(JSON.parse(unlimited.stdout)).toMatchObject({ concurrency: null, rateLimit: null, weight: 3 });
    expectOneLine(
      await skiplock(['tenants', 'set', 'cli-tenant']),
      2,
      /give at least one of --concurrency, --rate-limit, --weight$/,
    );
    expectOneLine(
      await skiplock(['tenants', 'set', 'cli-tenant', '--concurrency', '999999999']),
      1,
      /400 Invalid request: .*\(concurrency: Too big/,
    );
  });

  it('queues set --rate-limit sets the queue rate limit over all tenants, keeps the rest, and refuses bad ones in one line', async () => {
    await skiplock(['queues', 'set', 'cli-rated', '--concurrency', '3']);
    const rated = await skiplock(['queues', 'set', 'cli-rated', '--rate-limit', '20/60']);
    expect(rated.code).toBe(0);
    expect(rated.stdout).toMatch(
      /\nrate limit +20 started per 60 s, over all tenants, the excess waits \(0 in the window now\)\n/,
    );
    expect(JSON.parse((await skiplock(['queues', 'get', 'cli-rated', '--json'])).stdout)).toMatchObject({
      concurrency: 3,
      rateLimit: { count: 20, perSeconds: 60 },
      startsInWindow: 0,
    });
    await enqueue('cli-rated', { payload: 1, delaySeconds: 3600 });
    const listed = await skiplock(['queues']);
    expect(listed.stdout).toMatch(/ DEBOUNCED +CAP +RATE +WEIGHT/);
    expect(listed.stdout).toMatch(/\ncli-rated .* 20\/60s +1 /);
    expectOneLine(
      await skiplock(['queues', 'set', 'cli-rated', '--rate-limit', '0/60']),
      1,
      /400 Invalid request: .*\(rateLimit\.count: Too small/,
    );
    expectOneLine(
      await skiplock(['queues', 'set', 'cli-rated', '--rate-limit', '5/0']),
      1,
      /400 Invalid request: .*\(rateLimit\.perSeconds: Too small/,
    );
    expectOneLine(
      await skiplock(['queues', 'set', 'cli-rated', '--rate-limit=-1/60']),
      2,
      /--rate-limit must be COUNT\/SECONDS \(100\/60: 100 jobs started per 60 s\) or none, not "-1\/60"$/,
    );
    // Nothing changed by the refusals; none lifts it.
    expect(JSON.parse((await skiplock(['queues', 'get', 'cli-rated', '--json'])).stdout)).toMatchObject({
      rateLimit: { count: 20, perSeconds: 60 },
    });
    const lifted = await skiplock(['queues', 'set', 'cli-rated', '--rate-limit', 'none', '--json']);
    expect(JSON.parse(lifted.stdout)).toMatchObject({ concurrency: 3, rateLimit: null, startsInWindow: null });
  });

  it('queues set --rate-on-excess drop drops the excess at enqueue, keeps the numbers, and refuses it without a limit', async () => {
    expectOneLine(
      await skiplock(['queues', 'set', 'cli-dropping', '--rate-on-excess', 'drop']),
      2,
      /--rate-on-excess needs a rate limit: give --rate-limit COUNT\/SECONDS too$/,
    );
    const dropping = await skiplock([
      'queues',
      'set',
      'cli-dropping',
      '--rate-limit',
      '1/3600',
      '--rate-on-excess',
      'drop',
    ]);
    expect(dropping.code).toBe(0);
    expect(dropping.stdout).toMatch(
      /\nrate limit +1 started per 3600 s, over all tenants, the excess dropped at enqueue \(0 in the window now\)\n/,
    );
    // New numbers keep the behaviour; the behaviour alone keeps the numbers.
    await skiplock(['queues', 'set', 'cli-dropping', '--rate-limit', '2/3600']);
    expect(JSON.parse((await skiplock(['queues', 'get', 'cli-dropping', '--json'])).stdout)).toMatchObject({
      rateLimit: { count: 2, perSeconds: 3600, onExcess: 'drop' },
    });
    const answers = [];
    for (const payload of [1, 2, 3]) answers.push(await enqueue('cli-dropping', { payload }));
    expect(answers.map((job) => job.status)).toEqual(['queued', 'queued', 'cancelled']);
    expect((await skiplock(['queues'])).stdout).toMatch(/\ncli-dropping .* 2\/3600s drop +1 /);
    expectOneLine(
      await skiplock(['queues', 'set', 'cli-dropping', '--rate-on-excess', 'wait']),
      2,
      /--rate-on-excess must be throttle or drop, not "wait"$/,
    );
    expectOneLine(
      await skiplock(['queues', 'set', 'cli-dropping', '--rate-limit', 'none', '--rate-on-excess', 'drop']),
      2,
      /--rate-on-excess needs a rate limit, not --rate-limit none$/,
    );
    const throttling = await skiplock(['queues', 'set', 'cli-dropping', '--rate-on-excess', 'throttle', '--json']);
    expect(JSON.parse(throttling.stdout)).toMatchObject({
      rateLimit: { count: 2, perSeconds: 3600, onExcess: 'throttle' },
    });
  });

  it('queues set changes the setting given and keeps the other; queues get shows them; queues still lists', async () => {
    const set = await skiplock(['queues', 'set', 'cli-queue', '--concurrency', '4']);
    expect(set.stdout).toMatch(
      /^queue +cli-queue\nconcurrency +4 running at once, over all tenants\nrate limit +none\nweight +1\ndelivery +none \(handlers run the jobs\)\nrunning +0\n/,
    );
    await skiplock(['queues', 'set', 'cli-queue', '--weight', '5']);
    const got = await skiplock(['queues', 'get', 'cli-queue', '--json']);
    expect(JSON.parse(got.stdout)).toEqual({
      name: 'cli-queue',
      concurrency: 4,
      weight: 5,
      delivery: null,
      pausedAt: null,
      retentionSeconds: null,
      deadLetterQueue: null,
      rateLimit: null,
      custom: true,
      running: 0,
      startsInWindow: null,
    });
    const paused = await skiplock(['queues', 'pause', 'cli-queue']);
    expect(paused.stdout).toMatch(/\npaused +since \d{4}-\d\d-\d\dT/);
    expect(JSON.parse((await skiplock(['queues', 'resume', 'cli-queue', '--json'])).stdout)).toMatchObject({
      concurrency: 4,
      weight: 5,
      pausedAt: null,
    });
    const uncapped = await skiplock(['queues', 'set', 'cli-queue', '--concurrency', 'none', '--json']);
    expect(JSON.parse(uncapped.stdout)).toMatchObject({ concurrency: null, weight: 5 });
    expect((await skiplock(['queues', '--json'])).code).toBe(0);
    const noHistory = await skiplock(['queues', 'set', 'cli-queue', '--retention', 'none']);
    expect(noHistory.stdout).toMatch(/\nretention +none for succeeded jobs \(failed ones: the default\)\n/);
    expect(
      JSON.parse((await skiplock(['queues', 'set', 'cli-queue', '--retention', '86400', '--json'])).stdout),
    ).toMatchObject({
      concurrency: null,
      weight: 5,
      retentionSeconds: 86_400,
    });
    expectOneLine(
      await skiplock(['queues', 'set', 'cli-queue', '--retention', '30']),
      1,
      /400 Invalid request: .*\(retentionSeconds: whole seconds from 60 to 315360000 \(ten years\), or "none"/,
    );
    expectOneLine(
      await skiplock(['queues', 'set', 'cli-queue', '--retention', 'forever']),
      2,
      /--retention must be a whole number, none or default, not "forever"$/,
    );
    expect(JSON.parse((await skiplock(['queues', 'get', 'cli-queue', '--json'])).stdout)).toMatchObject({
      retentionSeconds: 86_400,
    });
    expect(
      JSON.parse((await skiplock(['queues', 'set', 'cli-queue', '--retention', 'default', '--json'])).stdout),
    ).toMatchObject({
      weight: 5,
      retentionSeconds: null,
    });
    const lettered = await skiplock(['queues', 'set', 'cli-queue', '--dead-letter-queue', 'cli-dead']);
    expect(lettered.stdout).toMatch(/\ndead letters +failed jobs move to cli-dead\n/);
    expectOneLine(
      await skiplock(['queues', 'set', 'cli-queue', '--dead-letter-queue', 'cli-queue']),
      1,
      /400 Invalid request: deadLetterQueue: a queue cannot be its own dead-letter queue/,
    );
    expect(
      JSON.parse((await skiplock(['queues', 'set', 'cli-queue', '--dead-letter-queue', 'none', '--json'])).stdout),
    ).toMatchObject({ weight: 5, deadLetterQueue: null });
    expectOneLine(
      await skiplock(['queues', 'set', 'cli-queue']),
      2,
      /give at least one of --concurrency, --rate-limit, --rate-on-excess, --weight, --webhook, --cloudflare-queue, --no-delivery, --retention, --dead-letter-queue$/,
    );
    // The local stack allows no host (HTTP_ALLOWED_HOSTS is empty) and binds no Cloudflare queue: both targets are refused, by field.
    expectOneLine(
      await skiplock(['queues', 'set', 'cli-queue', '--webhook', 'https://hooks.example.com/in', '--batch-size', '20']),
      1,
      /400 Invalid request: delivery\.url: host hooks\.example\.com is not allowed: HTTP_ALLOWED_HOSTS is empty/,
    );
    expectOneLine(
      await skiplock(['queues', 'set', 'cli-queue', '--cloudflare-queue', 'DELIVERY_QUEUE_EVENTS']),
      1,
      /400 Invalid request: delivery\.binding: this Worker has no Queues producer binding named DELIVERY_QUEUE_EVENTS/,
    );
    expectOneLine(
      await skiplock(['queues', 'set', 'cli-queue', '--webhook', 'https://a.example/', '--no-delivery']),
      2,
      /give one of --webhook, --cloudflare-queue, --no-delivery$/,
    );
    expectOneLine(
      await skiplock(['queues', 'set', 'cli-queue', '--secret-name', 'HOOK']),
      2,
      /--secret-name goes with --webhook$/,
    );
    expect(JSON.parse((await skiplock(['queues', 'get', 'cli-queue', '--json'])).stdout)).toMatchObject({
      concurrency: null,
      weight: 5,
      delivery: null,
    });
    expectOneLine(
      await skiplock(['queues', 'set', 'cli-queue', '--weight', 'heavy']),
      2,
      /--weight must be a whole number, not "heavy"$/,
    );
    expectOneLine(
      await skiplock(['queues', 'set', 'cli-queue', '--weight', '0']),
      1,
      /400 Invalid request: .*\(weight: Too small/,
    );
  });

  it("job-types set gives a type an operator's retention, or hands it back; job-types list shows who set it", async () => {
    expect((await skiplock(['job-types', 'list'])).stdout.trim()).toBe('no job type has a retention of its own');
    const none = await skiplock(['job-types', 'set', 'cli-ping', '--retention', 'none']);
    expect(none.stdout).toMatch(/^type +cli-ping\nretention +none for succeeded jobs .*\nset by +an operator /);
    expect(
      JSON.parse((await skiplock(['job-types', 'set', 'cli-report', '--retention', '86400', '--json'])).stdout),
    ).toMatchObject({ type: 'cli-report', retentionSeconds: 86_400, setBy: 'operator' });
    expectOneLine(
      await skiplock(['job-types', 'set', 'cli-ping', '--retention', '30']),
      1,
      /400 Invalid request: .*\(retentionSeconds: whole seconds from 60 to 315360000 \(ten years\), or "none"/,
    );
    expectOneLine(
      await skiplock(['job-types', 'set', 'cli-ping', '--retention', 'forever']),
      2,
      /--retention must be a whole number, none, default or definition, not "forever"$/,
    );
    expectOneLine(await skiplock(['job-types', 'set', 'cli-ping']), 2, /give --retention SECONDS, none, default/);
    const back = await skiplock(['job-types', 'set', 'cli-ping', '--retention', 'definition', '--json']);
    expect(JSON.parse(back.stdout)).toMatchObject({ type: 'cli-ping', retentionSeconds: null, setBy: 'definition' });
    const listed = JSON.parse((await skiplock(['job-types', 'list', '--json'])).stdout) as {
      jobTypes: { type: string; retentionSeconds: unknown; setBy: string }[];
    };
    expect(listed.jobTypes.map(({ type, retentionSeconds, setBy }) => ({ type, retentionSeconds, setBy }))).toEqual([
      { type: 'cli-ping', retentionSeconds: null, setBy: 'definition' },
      { type: 'cli-report', retentionSeconds: 86_400, setBy: 'operator' },
    ]);
    expect((await skiplock(['job-types', 'list'])).stdout).toMatch(/\ncli-report +86400 s +operator /);
  });

  it('keys create, list and revoke; a key without the scope is forbidden, a revoked one refused', async () => {
    const created = JSON.parse(
      (await skiplock(['keys', 'create', '--name', 'cli-reader', '--scope', 'read', '--json'])).stdout,
    ) as {
      id: string;
      secret: string;
    };
    expect(created.secret).toMatch(/^skiplock_/);
    const listed = await skiplock(['keys', 'list']);
    expect(listed.stdout).toMatch(
      new RegExp(`\\n${created.id} +cli-reader +read +\\* +\\* +skiplock_\\S+ +\\d{4}-\\S+ +-\\n`),
    );

    const idle = await enqueue('cli-keys', { type: 'cli-idle' });
    expect((await skiplock(['jobs', 'get', idle.id], { SKIPLOCK_API_KEY: created.secret })).code).toBe(0);
    expectOneLine(
      await skiplock(['jobs', 'cancel', idle.id], { SKIPLOCK_API_KEY: created.secret }),
      4,
      /^skiplock jobs: 403 Forbidden: this key lacks the .*scope: use a key with that scope$/,
    );

    const revoked = await skiplock(['keys', 'revoke', created.id]);
    expect(revoked.stdout).toMatch(new RegExp(`^key ${created.id} \\(cli-reader\\) is revoked since \\d{4}-`));
    expectOneLine(
      await skiplock(['jobs', 'get', idle.id], { SKIPLOCK_API_KEY: created.secret }),
      4,
      /^skiplock jobs: the API refused the key: 401 Unauthorized: the API key is unknown or revoked; check SKIPLOCK_API_KEY$/,
    );
  });

  it('says in one line, with an exit code of its kind, what is wrong: never a stack trace', async () => {
    const nowhere = `http://127.0.0.1:${await anyFreePort()}`;
    const expectations: Array<[string[], Record<string, string | undefined>, number, RegExp]> = [
      [['queues'], { SKIPLOCK_URL: nowhere }, 3, /cannot reach .* \(connection refused\): is skiplock running there/],
      [['queues', '--url', 'not a url'], {}, 2, /^skiplock queues: --url must be an http:\/\/ or https:\/\/ URL/],
      [['queues'], { SKIPLOCK_URL: undefined }, 2, /^skiplock queues: SKIPLOCK_URL is not set/],
      [['stats'], { SKIPLOCK_API_KEY: undefined }, 2, /^skiplock stats: SKIPLOCK_API_KEY is not set/],
      [['queues', '--api-key', 'wrong'], {}, 4, /the API refused the key: 401 .*; check --api-key$/],
      [['jobs', 'get', crypto.randomUUID()], {}, 5, /^skiplock jobs: 404 Not found: no job with this id/],
      [['keys', 'revoke', crypto.randomUUID()], {}, 5, /^skiplock keys: 404 Not found: no API key with this id$/],
      [['jobs', 'get', 'nope'], {}, 2, /^skiplock jobs: JOB_ID must be an id \(a UUID\), not "nope"$/],
      [['jobs', 'get'], {}, 2, /^skiplock jobs: JOB_ID is missing; usage: skiplock jobs get JOB_ID/],
      [['jobs'], {}, 2, /^skiplock jobs: a subcommand is missing; one of: jobs list/],
      [['jobs', 'list', '--frob'], {}, 2, /^skiplock jobs: Unknown option '--frob'; usage:/],
      [['jobs', 'list', '--status', 'lost'], {}, 1, /400 Invalid request: .*\(status: Invalid option/],
    ];
    const runs = await Promise.all(expectations.map(([args, env]) => skiplock(args, env)));
    for (const [index, run] of runs.entries()) expectOneLine(run, expectations[index]![2], expectations[index]![3]);

    // Something that answers, but is not skiplock.
    const stranger = createServer((_request, response) => response.end('<html>hello</html>'));
    await new Promise<void>((resolve) => stranger.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = stranger.address() as AddressInfo;
      const other = `http://127.0.0.1:${port}`;
      expectOneLine(
        await skiplock(['queues', '--url', other]),
        3,
        /answered something other than a skiplock API's JSON: check --url$/,
      );
    } finally {
      stranger.close();
    }
  });
});

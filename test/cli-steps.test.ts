import { execFile } from 'node:child_process';
import { rm } from 'node:fs/promises';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { anyFreePort } from '../src/local/ports';
import { compileCli, type CompiledCli } from './support/compiled-cli';
import { projectRoot } from './support/repository-root';
import { createTestDatabase, type TestDatabase } from './support/database';
import { npmStart, scratchCheckout, type NpmStart } from './support/npm-start';
import { waitFor } from './support/wait-for';

const ADMIN = 'cli-steps-admin';

/** Each look runs the CLI (a Node process of its own): a deadline for a loaded machine, not a duration relied on. */
const SLOW_WAIT = { timeoutMs: 60_000, everyMs: 200 };
/** A test that runs the CLI many times. */
const CLI_TEST_TIMEOUT_MS = 150_000;

interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * `skiplock events send` and the durable steps `skiplock jobs get` shows, against
 * the API of a running `npm start` (whose dev mode runs the demo-workflow job),
 * as test/cli-operator.test.ts runs the other operator commands (the CLI
 * compiled once for the file: test/support/compiled-cli.ts).
 */
describe('skiplock events send and jobs get with durable steps against npm start', () => {
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

  async function post<T>(path: string, body: unknown): Promise<T> {
    const response = await fetch(`${url}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    expect(response.status).toBe(201);
    return (await response.json()) as T;
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

  it(
    'jobs get shows a workflow waiting for its event; events send wakes it; jobs get shows its steps done',
    async () => {
      const key = `order-${crypto.randomUUID()}`;
      const job = await post<{ id: string }>('/v1/queues/demo-workflow/jobs', {
        type: 'demo-workflow',
        payload: { key, timeoutMs: 600_000 },
      });

      const waiting = await waitFor(
        `jobs get to show job ${job.id} waiting for demo.approved`,
        async () => {
          const run = await skiplock(['jobs', 'get', job.id]);
          return run.stdout.includes('waiting for') && run;
        },
        SLOW_WAIT,
      );
      expect({ code: waiting.code, stderr: waiting.stderr }).toEqual({ code: 0, stderr: '' });
      const parked = waiting.stdout;
      expect(parked).toMatch(new RegExp(`^id +${job.id}\\nstatus +scheduled\\n`));
      expect(parked).toMatch(
        /\n\nSTEP +KIND +STATUS +ATTEMPT +RECORDED +RESULT\nstart +do +done +1 +\d{4}-\S+Z +\{"startedAt":"/,
      );
      expect(parked).toMatch(
        new RegExp(
          `\\n\\nwaiting for +event demo\\.approved \\(key ${key}\\), times out \\d{4}-\\S+Z \\(step approval\\)\\n?$`,
        ),
      );
      const parkedJson = JSON.parse((await skiplock(['jobs', 'get', job.id, '--json'])).stdout) as {
        id: string;
        steps: { steps: unknown[]; waitingFor: unknown[]; links: unknown[] };
      };
      expect(parkedJson).toMatchObject({
        id: job.id,
        status: 'scheduled',
        steps: {
          steps: [{ name: 'start', kind: 'do', status: 'done' }],
          waitingFor: [{ kind: 'event', step: 'approval', event: 'demo.approved', key }],
          links: [],
        },
      });

      const sent = await skiplock(['events', 'send', 'demo.approved', '--key', key, '--payload', '{"ok":true}']);
      expect(sent).toEqual({
        code: 0,
        stdout: `sent demo.approved (key ${key}) to tenant default: 1 job woken\n`,
        stderr: '',
      });

      const done = await waitFor(
        `jobs get to show job ${job.id} succeeded`,
        async () => {
          const run = await skiplock(['jobs', 'get', job.id]);
          return /\nstatus +succeeded\n/.test(run.stdout) && run;
        },
        SLOW_WAIT,
      );
      const result = /\nresult +(\{.*\})\n/.exec(done.stdout)?.[1];
      expect(JSON.parse(result!)).toEqual({
        startedAt: expect.any(String),
        approved: true,
        approval: { ok: true },
        children: [],
      });
      const table = done.stdout.slice(done.stdout.indexOf('\n\n') + 2).split('\n');
      expect(table).toEqual([
        expect.stringMatching(/^STEP +KIND +STATUS +ATTEMPT +RECORDED +RESULT$/),
        expect.stringMatching(/^start +do +done +1 +\S+ +\{"startedAt":"/),
        expect.stringMatching(/^approval +event +done +- +\S+ +\{.*"payload":\{"ok":true\}/),
        '',
      ]);
      expect(done.stdout).not.toContain('waiting for');

      const endedJson = JSON.parse((await skiplock(['jobs', 'get', job.id, '--wait', '--json'])).stdout) as {
        steps: { steps: Array<{ name: string; result: unknown }>; waitingFor: unknown[] };
      };
      expect(endedJson.steps.steps.map((step) => step.name)).toEqual(['start', 'approval']);
      expect(endedJson.steps.steps[1]!.result).toEqual({ payload: { ok: true }, sentAt: expect.any(String) });
      expect(endedJson.steps.waitingFor).toEqual([]);

      // The job has ended: the same event again wakes nothing; --json answers the API's own.
      const again = await skiplock(['events', 'send', 'demo.approved', '--key', key, '--keep-seconds', '0', '--json']);
      expect(JSON.parse(again.stdout)).toEqual({
        event: 'demo.approved',
        key,
        tenant: 'default',
        sentAt: expect.any(String),
        woken: 0,
      });
      expect((await skiplock(['events', 'send', 'cli.nobody-waits', '--tenant', 'cli-events'])).stdout).toBe(
        'sent cli.nobody-waits to tenant cli-events: 0 jobs woken\n',
      );
    },
    CLI_TEST_TIMEOUT_MS,
  );

  it(
    'jobs get shows the dependencies a flow job waits for and the jobs linked to it',
    async () => {
      // cli-idle: a type nothing runs, so `first` stays queued and `second` waits for it.
      const { jobs } = await post<{ jobs: Array<{ ref: string; id: string }> }>('/v1/flows', {
        jobs: [
          { ref: 'first', queue: 'cli-flow', type: 'cli-idle' },
          { ref: 'second', queue: 'cli-flow', type: 'noop', dependsOn: ['first'] },
        ],
      });
      const [first, second] = jobs;

      const dependent = await skiplock(['jobs', 'get', second!.id]);
      expect(dependent.code).toBe(0);
      expect(dependent.stdout).toMatch(
        new RegExp(
          `\\n\\nwaiting for +dependency job ${first!.id}\\nlinked +dependency ${first!.id}: cli-idle queued\\n$`,
        ),
      );
      expect(dependent.stdout).not.toContain('STEP');
      const dependency = await skiplock(['jobs', 'get', first!.id]);
      expect(dependency.stdout).toMatch(new RegExp(`\\n\\nlinked +dependent ${second!.id}: noop \\w+\\n$`));
      expect(dependency.stdout).not.toContain('waiting for');
    },
    CLI_TEST_TIMEOUT_MS,
  );

  it(
    'keys create makes a key of the events scope, which sends events and nothing else',
    async () => {
      const created = await skiplock(['keys', 'create', '--name', 'cli-events', '--scope', 'events']);
      expect(created.stdout).toMatch(/\nscopes +events\n/);
      const secret = /\nsecret +(\S+)/.exec(created.stdout)![1]!;

      const sent = await skiplock(['events', 'send', 'cli.by-key'], { SKIPLOCK_API_KEY: secret });
      expect(sent).toEqual({ code: 0, stdout: 'sent cli.by-key to tenant default: 0 jobs woken\n', stderr: '' });
      expectOneLine(
        await skiplock(['jobs', 'list'], { SKIPLOCK_API_KEY: secret }),
        4,
        /^skiplock jobs: 403 Forbidden: .*: use a key with that scope$/,
      );

      const reader = JSON.parse(
        (await skiplock(['keys', 'create', '--name', 'cli-no-events', '--scope', 'read,enqueue', '--json'])).stdout,
      ) as { secret: string };
      expectOneLine(
        await skiplock(['events', 'send', 'cli.by-key'], { SKIPLOCK_API_KEY: reader.secret }),
        4,
        /^skiplock events: 403 Forbidden: this key lacks the .*scope: use a key with that scope$/,
      );
      expectOneLine(
        await skiplock(['keys', 'create', '--name', 'cli-nothing']),
        2,
        /^skiplock keys: --name and at least one --scope \(admin, enqueue, read, worker, events, operator\) are required$/,
      );
      expectOneLine(
        await skiplock(['keys', 'create', '--name', 'cli-wrong', '--scope', 'event']),
        1,
        /^skiplock keys: 400 Invalid request: .*\(scopes\.0: Invalid option: expected one of .*"events"/,
      );
    },
    CLI_TEST_TIMEOUT_MS,
  );

  it(
    'refuses bad input to events send in one line, with an exit code of its kind',
    async () => {
      const expectations: Array<[string[], number, RegExp]> = [
        [['events', 'send'], 2, /^skiplock events: EVENT is missing; usage: skiplock events send EVENT /],
        [['events', 'send', 'a', 'b'], 2, /^skiplock events: unexpected "b"; usage: skiplock events send EVENT /],
        [['events'], 2, /^skiplock events: a subcommand is missing; one of: events send: /],
        [['events', 'emit', 'x'], 2, /^skiplock events: unknown subcommand "emit"; one of: events send: /],
        [
          ['events', 'send', 'demo.approved', '--payload', '{ok: true}'],
          2,
          /^skiplock events: --payload must be JSON, such as '\{"ok":true\}', not "\{ok: true\}"$/,
        ],
        [
          ['events', 'send', 'demo.approved', '--keep-seconds', 'a day'],
          2,
          /^skiplock events: --keep-seconds must be a whole number, not "a day"$/,
        ],
        [
          ['events', 'send', 'demo.approved', '--keep-seconds', '99999999'],
          1,
          /^skiplock events: 400 Invalid request: .*\(keepSeconds: Too big/,
        ],
        [['events', 'send', ''], 1, /^skiplock events: 400 Invalid request: .*\(event: Too small/],
        [['events', 'send', 'x', '--frob'], 2, /^skiplock events: Unknown option '--frob'; usage:/],
        [
          ['events', 'send', 'x', '--tenant', 'bad\u0001name'],
          1,
          /^skiplock events: 400 Invalid request: .*\(tenant: /,
        ],
      ];
      const runs = await Promise.all(expectations.map(([args]) => skiplock(args)));
      for (const [index, run] of runs.entries()) {
        expectOneLine(run, expectations[index]![1], expectations[index]![2]);
        expect(run.stdout).toBe('');
      }
      const help = await skiplock(['help']);
      expect(help.stdout).toMatch(/\n {2}events +events send EVENT \[--key K\] \[--payload JSON\]: /);
    },
    CLI_TEST_TIMEOUT_MS,
  );
});

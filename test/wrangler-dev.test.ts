import { mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { anyFreePort } from '../src/local/ports';
import { startLocalWorker, type LocalWorker } from '../src/local/start/local-worker';

const repositoryModules = join(import.meta.dirname, '..', 'node_modules');

/** A Worker project of one file that answers every request, with this repository's wrangler. */
let project: string;

beforeAll(async () => {
  project = await mkdtemp(join(tmpdir(), 'skiplock-wrangler-dev-'));
  await writeFile(join(project, 'index.js'), 'export default { fetch: () => new Response("ok") };\n');
  await writeFile(
    join(project, 'wrangler.toml'),
    'name = "two-at-once"\nmain = "index.js"\ncompatibility_date = "2026-04-26"\n',
  );
  await writeFile(join(project, 'worker.env'), '');
  await symlink(repositoryModules, join(project, 'node_modules'));
});

afterAll(async () => {
  await rm(project, { recursive: true, force: true });
});

describe('wrangler dev as skiplock dev runs it', () => {
  it('comes up twice when two start at once: they do not race for the inspector port (9229 or the next free one)', async () => {
    const ports = [await anyFreePort(), await anyFreePort()];
    const started = await Promise.allSettled(
      ports.map((port, index) =>
        startLocalWorker(
          { variable: '--port', requested: port },
          {
            projectRoot: project,
            envFile: join(project, 'worker.env'),
            persistTo: join(project, `state-${index}`),
            logFile: join(project, `wrangler-${index}.log`),
          },
          new AbortController().signal,
        ),
      ),
    );
    const workers = started.flatMap((outcome) => (outcome.status === 'fulfilled' ? [outcome.value] : []));
    try {
      expect(started.map((outcome) => outcome.status)).toEqual(['fulfilled', 'fulfilled']);
      for (const worker of workers) expect(await (await fetch(worker.url)).text()).toBe('ok');
    } finally {
      await Promise.all(workers.map((worker: LocalWorker) => worker.wrangler.stop()));
    }
  });
});

import { runDevStack } from '../local/start/dev-stack.js';
import { printDevConfig } from '../local/start/print-config.js';
import { readStartConfig } from '../local/start/start-config.js';
import { readOptions } from './read-options.js';

const USAGE =
  'usage: skiplock dev [--cwd DIR] [--port N] [--drain-every SECONDS] [--state-dir DIR] [--demo-jobs] [--print-config]';

/**
 * `skiplock dev`: the project's Worker under its own `wrangler dev`, on a
 * local Postgres (embedded, or DATABASE_URL's) through the local Neon proxy,
 * with its cron drains fired, until Ctrl-C. `--print-config` prints the
 * lines for running wrangler yourself instead.
 */
export async function devCommand(args: string[]): Promise<void> {
  const { values } = readOptions(
    args,
    {
      cwd: { type: 'string' },
      port: { type: 'string' },
      'drain-every': { type: 'string' },
      'state-dir': { type: 'string' },
      'demo-jobs': { type: 'boolean' },
      'print-config': { type: 'boolean' },
    },
    USAGE,
  );
  const config = readStartConfig(process.env, {
    cwd: values.cwd,
    port: values.port,
    drainEvery: values['drain-every'],
    stateDir: values['state-dir'],
    demoJobs: values['demo-jobs'],
  });
  await (values['print-config'] ? printDevConfig(config) : runDevStack(config));
}

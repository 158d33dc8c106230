import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

// Wrangler's own reader, so the schedule is the one `wrangler deploy` would
// publish. It runs in a child process because importing wrangler installs
// signal handlers of its own in the importing process.
const PRINT_CRONS = `
import { unstable_readConfig } from 'wrangler';
try {
  const { triggers } = unstable_readConfig({ config: process.argv[1] });
  process.stdout.write(JSON.stringify(triggers.crons ?? []));
} catch (error) {
  process.stderr.write(error.message);
  process.exitCode = 1;
}
`;

const CONFIG_FILE = 'wrangler.toml';

/** The `[triggers] crons` of the project's wrangler.toml. */
export async function readCronTriggers(projectRoot: string): Promise<string[]> {
  try {
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ['--input-type=module', '--eval', PRINT_CRONS, CONFIG_FILE],
      { cwd: projectRoot },
    );
    return JSON.parse(stdout) as string[];
  } catch (error) {
    const stderr = (error as { stderr?: string }).stderr?.trim();
    const reason = stderr || (error as Error).message;
    throw new Error(`cannot read the cron triggers of ${CONFIG_FILE}: ${reason}`, { cause: error });
  }
}

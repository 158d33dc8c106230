import { spawn } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';

export interface ProcessExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** A command running as the leader of its own process group, with everything it started. */
export interface ProcessGroup {
  readonly pid: number;
  /** Settles when the leader exits, whoever ended it. */
  readonly exited: Promise<ProcessExit>;
  /**
   * Ends every process of the group: SIGTERM, then SIGKILL for whatever is
   * still there after `graceMs`. Resolves once none is left.
   */
  stop(graceMs?: number): Promise<void>;
}

export interface SpawnGroupOptions {
  cwd: string;
  env: NodeJS.ProcessEnv;
  /** A file descriptor that receives both stdout and stderr. */
  output: number;
}

const POLL_MS = 100;

/**
 * Spawns a command in a new process group. Its grandchildren (wrangler's
 * workerd) join that group, so one signal to the group reaches the whole tree;
 * and a Ctrl-C in the terminal reaches only the caller, which then stops the
 * group in its own order.
 */
export async function spawnProcessGroup(
  command: string,
  args: readonly string[],
  options: SpawnGroupOptions,
): Promise<ProcessGroup> {
  const child = spawn(command, args, {
    cwd: options.cwd,
    env: options.env,
    detached: true,
    stdio: ['ignore', options.output, options.output],
  });
  const exited = new Promise<ProcessExit>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  await new Promise<void>((resolve, reject) => {
    child.once('spawn', resolve);
    child.once('error', reject);
  });
  const pid = child.pid!;
  return {
    pid,
    exited,
    async stop(graceMs = 5_000) {
      signalGroup(pid, 'SIGTERM');
      if (await waitUntilGone(-pid, graceMs)) return;
      signalGroup(pid, 'SIGKILL');
      if (!(await waitUntilGone(-pid, graceMs))) throw new Error(`process group ${pid} is still there after SIGKILL`);
    },
  };
}

/** True while a process with this id exists (a negative id: while its process group has a member). */
export function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: it exists but belongs to someone else.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Polls until the process (or, negative, the process group) is gone; false when `timeoutMs` ran out first. */
export async function waitUntilGone(pid: number, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (isRunning(pid)) {
    if (Date.now() >= deadline) return false;
    await sleep(POLL_MS);
  }
  return true;
}

function signalGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
  }
}

import { execFileSync } from 'node:child_process';
import { symlinkSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface Baseline {
  /** The commit as given (`7e7ccdc`, `main~3`), which names the system: `skiplock@<ref>`. */
  ref: string;
  /** A checkout of it, sharing this tree's node_modules. */
  root: string;
  remove(): void;
}

const repository = new URL('..', import.meta.url).pathname;

/**
 * Checks out `ref` beside this tree (a detached git worktree in the
 * temporary folder) so that the benchmark measures this tree and that
 * commit in one run, on the same server, workload after workload. Both use
 * this tree's node_modules: a baseline whose dependencies differ is not
 * what this compares.
 */
export async function checkOutBaseline(ref: string): Promise<Baseline> {
  const root = await mkdtemp(join(tmpdir(), 'skiplock-bench-baseline-'));
  const git = (...args: string[]) => execFileSync('git', ['-C', repository, ...args], { stdio: 'pipe' });
  git('worktree', 'add', '--detach', root, ref);
  symlinkSync(join(repository, 'node_modules'), join(root, 'node_modules'));
  return { ref, root, remove: () => git('worktree', 'remove', '--force', root) };
}

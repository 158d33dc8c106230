#!/usr/bin/env node
// npm run test:loaded: `npm test` while one busy loop per core competes with it
// for the CPU, as on a loaded CI machine. A test that waits for a duration
// instead of a state fails here first. The loops end with this script, however it ends.
import { spawn } from 'node:child_process';
import { availableParallelism } from 'node:os';

// Each loop also ends by itself once its parent is gone (SIGKILL leaves no handler to stop it).
const BUSY_LOOP =
  'const parent = process.ppid; for (;;) { for (let i = 0; i < 1e8; i++); if (process.ppid !== parent) process.exit(); }';

const hogs = Array.from({ length: availableParallelism() }, () =>
  spawn(process.execPath, ['-e', BUSY_LOOP], { stdio: 'ignore' }),
);
const stopHogs = () => {
  for (const hog of hogs) hog.kill('SIGKILL');
};
process.on('exit', stopHogs);

console.log(`test:loaded: ${hogs.length} busy loops (one per core) beside npm test`);
const started = Date.now();
const test = spawn('npm', ['test'], { stdio: 'inherit' });
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.on(signal, () => {
    test.kill(signal);
    stopHogs();
    process.exit(1);
  });
}
test.on('exit', (code, signal) => {
  const minutes = ((Date.now() - started) / 60_000).toFixed(1);
  console.log(`test:loaded: npm test ended ${signal ?? `with exit code ${code}`} after ${minutes} min under load`);
  process.exit(code ?? 1);
});

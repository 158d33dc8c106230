import type { Job } from '../http/client.js';

/** How often the line's clock moves while the job does not change. */
const TICK_MS = 1000;

/**
 * One line on a terminal that follows a job: rewritten in place at each
 * change and each second. Off a terminal (a script, a pipe, a log) it writes
 * nothing, so what a script reads is only the answer.
 */
export function liveStatusLine(stream: NodeJS.WriteStream): { show(job: Job): void; end(): void } {
  if (!stream.isTTY) return { show: () => {}, end: () => {} };
  const started = Date.now();
  let latest: Job | undefined;
  const draw = () => {
    if (latest === undefined) return;
    const { id, status, attempts, maxAttempts, progress } = latest;
    const seconds = Math.floor((Date.now() - started) / 1000);
    const saved = progress === null ? '' : `, progress ${JSON.stringify(progress)}`;
    const text = `job ${id}: ${status}, attempt ${attempts} of ${maxAttempts}, ${seconds} s${saved}`;
    // Back to the line's start, clear it, and keep within the terminal's width.
    stream.write(`\r\x1b[2K${text.slice(0, Math.max(20, (stream.columns || 80) - 1))}`);
  };
  const ticker = setInterval(draw, TICK_MS);
  ticker.unref();
  return {
    show(job) {
      latest = job;
      draw();
    },
    end() {
      clearInterval(ticker);
      if (latest !== undefined) stream.write('\r\x1b[2K');
    },
  };
}

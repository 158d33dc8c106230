/**
 * What the benchmark prints while it runs: a line per step with the time
 * since the start, and the warnings and errors the libraries report (a
 * queue that logs errors under load is a finding, so they are shown, not
 * swallowed), at most a few of each kind.
 */
const startedAt = Date.now();
const incidentCounts = new Map<string, number>();
const SHOWN_PER_KIND = 3;

function clock(): string {
  const seconds = Math.floor((Date.now() - startedAt) / 1000);
  return `${String(Math.floor(seconds / 60)).padStart(2, '0')}:${String(seconds % 60).padStart(2, '0')}`;
}

export function progress(message: string): void {
  console.log(`[${clock()}] ${message}`);
}

/** A warning or error from a library under test. */
export function incident(source: string, message: string): void {
  const kind = `${source}: ${message.slice(0, 80)}`;
  const count = (incidentCounts.get(kind) ?? 0) + 1;
  incidentCounts.set(kind, count);
  if (count <= SHOWN_PER_KIND) console.warn(`[${clock()}]   ! ${source}: ${message}`);
  else if (count === SHOWN_PER_KIND + 1) console.warn(`[${clock()}]   ! ${source}: (further "${kind}" not shown)`);
}

/** Every kind of incident and how often it came, for the report. */
export function incidents(): Record<string, number> {
  return Object.fromEntries(incidentCounts);
}

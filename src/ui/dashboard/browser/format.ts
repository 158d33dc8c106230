/** Numbers as people read them: ages, durations, times from now, JSON. */

export function formatSeconds(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined) return '—';
  const whole = Math.max(0, Math.round(seconds));
  if (whole < 60) return `${whole} s`;
  if (whole < 3600) return `${Math.floor(whole / 60)} min ${whole % 60} s`;
  return `${Math.floor(whole / 3600)} h ${Math.floor((whole % 3600) / 60)} min`;
}

export function formatDuration(ms: number | null | undefined): string {
  if (ms === null || ms === undefined) return '—';
  return ms < 1000 ? `${ms} ms` : ms < 60000 ? `${(ms / 1000).toFixed(1)} s` : formatSeconds(ms / 1000);
}

/** "in 42 s" for a time ahead, "12 s ago" for one past. */
export function formatFromNow(iso: string | null): string {
  if (!iso) return '—';
  const seconds = (Date.parse(iso) - Date.now()) / 1000;
  return seconds >= 0 ? `in ${formatSeconds(seconds)}` : `${formatSeconds(-seconds)} ago`;
}

export function formatJson(value: unknown): string {
  return value === null || value === undefined ? '—' : JSON.stringify(value, null, 2);
}

/** The random end of a UUIDv7: its start is a timestamp, alike for jobs made together. */
export function shortId(id: string): string {
  return `…${id.slice(-12)}`;
}

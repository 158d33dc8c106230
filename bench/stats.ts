/** The spread of one figure over the repetitions of a run. */
export interface Summary {
  median: number;
  min: number;
  max: number;
  /** Every repetition's value, in the order they ran. */
  values: number[];
}

/** Nearest-rank percentile (p in 0..1) of unsorted values; NaN when there are none. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.ceil(p * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))]!;
}

export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}

export function mean(values: readonly number[]): number {
  return values.length === 0 ? Number.NaN : values.reduce((sum, value) => sum + value, 0) / values.length;
}

export function summarize(values: readonly number[]): Summary {
  return { median: median(values), min: Math.min(...values), max: Math.max(...values), values: [...values] };
}

/** Three significant digits, thousands separators from 100 on, "–" for what is not a number. */
export function formatNumber(value: number): string {
  if (!Number.isFinite(value)) return '–';
  if (Math.abs(value) >= 100 || Number.isInteger(value)) return Math.round(value).toLocaleString('en-US');
  if (Math.abs(value) >= 10) return value.toFixed(1);
  return value.toPrecision(3);
}

import type { JobStatus } from '../../../engine/types.js';
import { DEPTH_ORDER } from '../depth-order.js';
import type { ThroughputRow } from './api-types.js';
import { svg } from './elements.js';

/**
 * Inline SVG charts, drawn from the API's numbers: a bar per minute of the
 * last hour (throughput), a line of the same per queue (sparkline), and a
 * stacked bar of what a queue holds (depth). Each says its numbers in an
 * aria-label, since a picture alone tells a screen reader nothing.
 */

const MINUTES = 60;

/** One minute of the last hour: its start (ms since the epoch) and the jobs that finished in it. */
interface MinuteSlot {
  minute: number;
  succeeded: number;
  failed: number;
}

export function finishedIn(slot: MinuteSlot): number {
  return slot.succeeded + slot.failed;
}

/** The last hour as one slot per minute, oldest first, summing the given throughput rows. */
export function minuteSlots(rows: readonly ThroughputRow[]): MinuteSlot[] {
  const first = Math.floor(Date.now() / 60000) - MINUTES + 1;
  const slots = Array.from({ length: MINUTES }, (_, index) => ({
    minute: (first + index) * 60000,
    succeeded: 0,
    failed: 0,
  }));
  for (const row of rows) {
    // The server's clock may run a little ahead of or behind this one: clamp into the hour.
    const slot = slots[Math.min(MINUTES - 1, Math.max(0, Math.floor(Date.parse(row.minute) / 60000) - first))]!;
    slot.succeeded += row.succeeded;
    slot.failed += row.failed;
  }
  return slots;
}

function minuteLabel(slot: MinuteSlot): string {
  return new Date(slot.minute).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
}

export function throughputChart(slots: readonly MinuteSlot[]): SVGSVGElement {
  const width = 600;
  const height = 140;
  const peak = Math.max(1, ...slots.map(finishedIn));
  const step = width / slots.length;
  const succeeded = slots.reduce((sum, slot) => sum + slot.succeeded, 0);
  const failed = slots.reduce((sum, slot) => sum + slot.failed, 0);
  const chart = svg(
    'svg',
    {
      viewBox: `0 0 ${width} ${height}`,
      preserveAspectRatio: 'none',
      role: 'img',
      'aria-label': `${succeeded} jobs succeeded and ${failed} failed in the last hour; at most ${peak} in one minute`,
    },
    svg('line', { class: 'spark-base', x1: 0, y1: height - 0.5, x2: width, y2: height - 0.5 }),
  );
  slots.forEach((slot, index) => {
    const bar = svg(
      'g',
      {},
      svg('title', {}, `${minuteLabel(slot)}: ${slot.succeeded} succeeded, ${slot.failed} failed`),
    );
    const succeededHeight = (slot.succeeded / peak) * height;
    const failedHeight = (slot.failed / peak) * height;
    const x = index * step + 1;
    if (slot.succeeded > 0)
      bar.append(
        svg('rect', {
          class: 'bar-succeeded',
          x,
          width: step - 2,
          y: height - succeededHeight,
          height: succeededHeight,
        }),
      );
    if (slot.failed > 0)
      bar.append(
        svg('rect', {
          class: 'bar-failed',
          x,
          width: step - 2,
          y: height - succeededHeight - failedHeight,
          height: failedHeight,
        }),
      );
    chart.append(bar);
  });
  return chart;
}

export function sparkline(slots: readonly MinuteSlot[], label: string): SVGSVGElement {
  const width = 120;
  const height = 28;
  const peak = Math.max(1, ...slots.map(finishedIn));
  const points = slots
    .map(
      (slot, index) =>
        ((index * width) / (slots.length - 1)).toFixed(1) +
        ',' +
        (height - 1 - (finishedIn(slot) / peak) * (height - 2)).toFixed(1),
    )
    .join(' ');
  const total = slots.reduce((sum, slot) => sum + finishedIn(slot), 0);
  return svg(
    'svg',
    {
      width,
      height,
      viewBox: `0 0 ${width} ${height}`,
      role: 'img',
      'aria-label': `${label}: ${total} in the last hour`,
    },
    svg('line', { class: 'spark-base', x1: 0, y1: height - 0.5, x2: width, y2: height - 0.5 }),
    svg('polyline', { class: 'spark-line', points }),
  );
}

/** What a queue holds, stacked, on a scale shared by every queue's bar so they compare. */
export function depthBar(counts: Readonly<Record<JobStatus, number>>, deepest: number): SVGSVGElement {
  const width = 140;
  const height = 14;
  const bar = svg(
    'svg',
    {
      width,
      height,
      viewBox: `0 0 ${width} ${height}`,
      role: 'img',
      'aria-label': DEPTH_ORDER.map((status) => `${counts[status]} ${status}`).join(', '),
    },
    svg('rect', { class: 'depth-track', width, height, rx: 3 }),
  );
  let x = 0;
  for (const status of DEPTH_ORDER) {
    if (counts[status] === 0) continue;
    // At least a sliver, so a single job still shows next to thousands.
    const segment = Math.max(2, (counts[status] / deepest) * width);
    bar.append(svg('rect', { class: `depth-${status}`, x, width: segment, height }));
    x += segment;
  }
  return bar;
}

import type { JobStatusView } from '../../http/status-view.js';

const WAITING_WORDS = {
  time: 'Sleeping',
  event: 'Waiting for an event',
  children: 'Waiting for its child jobs',
  dependencies: 'Waiting for the jobs it depends on',
  turn: 'Waiting for its turn',
} as const;

/** What a parked job waits for, in words, its time written by `formatTime`. */
export function waitingWords(
  waiting: NonNullable<JobStatusView['waitingFor']>,
  formatTime: (iso: string) => string = (iso) => iso,
): string {
  const what = WAITING_WORDS[waiting.for];
  return waiting.until === null ? what : `${what}, until ${formatTime(waiting.until)}`;
}

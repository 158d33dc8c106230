/** What a queue's depth bar stacks, left to right; the legend beside it shows the same order. */
export const DEPTH_ORDER = ['running', 'queued', 'retrying', 'scheduled'] as const;

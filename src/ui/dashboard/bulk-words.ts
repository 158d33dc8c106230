import type { BulkActionName } from '../../engine/bulk-action.js';

/**
 * How the dashboard names each bulk action: its choice in the menu, the verb
 * of its question, the word of its outcome, and what it does to the jobs it
 * takes. The page's markup and its script both read them.
 */
export const BULK_ACTION_WORDS: Record<BulkActionName, { label: string; verb: string; done: string; effect: string }> =
  {
    retry: {
      label: 'Retry',
      verb: 'retry',
      done: 'Retried',
      effect: 'Failed, cancelled and expired jobs among them are queued again with fresh attempts.',
    },
    cancel: {
      label: 'Cancel',
      verb: 'cancel',
      done: 'Cancelled',
      effect: 'Waiting jobs among them are cancelled; running ones are asked to stop at their next heartbeat.',
    },
    reschedule: {
      label: 'Reschedule',
      verb: 'reschedule',
      done: 'Rescheduled',
      effect: 'Waiting jobs among them start no sooner than the delay from now.',
    },
    delete: {
      label: 'Delete finished',
      verb: 'delete',
      done: 'Deleted',
      effect: 'Finished jobs among them are deleted with their history. This cannot be undone.',
    },
    redrive: {
      label: 'Redrive dead jobs',
      verb: 'redrive',
      done: 'Redriven',
      effect: 'Failed jobs among them are queued again with fresh attempts.',
    },
  };

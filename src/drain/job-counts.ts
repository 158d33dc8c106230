/** What a run of the job loop did, for the drain's log line. */
export interface JobCounts {
  claimed: number;
  succeeded: number;
  /** Failed attempts that will be retried. */
  retrying: number;
  /** Jobs that failed for good or ran out of attempts. */
  failed: number;
  cancelled: number;
  /** Jobs given back to the queue: unstarted, or stopped at the deadline. */
  handedBack: number;
  /** Attempts whose lease another claim had taken over: their outcome was not written. */
  leaseLost: number;
  /** Jobs parked by a step (a sleep, a wait for an event or a child, a step's retry): they resume later. */
  parked: number;
}

export function noJobCounts(): JobCounts {
  return { claimed: 0, succeeded: 0, retrying: 0, failed: 0, cancelled: 0, handedBack: 0, leaseLost: 0, parked: 0 };
}

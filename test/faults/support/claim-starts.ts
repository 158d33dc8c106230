import type { Queryable } from '../../../src/db/types';

/**
 * Every start of every job as the claim made it: the claim sets the job's
 * `started_at` to its own clock reading (the time a rate limit's window is
 * judged at), which a retry overwrites and a drain's completion moves to
 * when the handler began. A trigger in the scenario's own database notes
 * each one in `claim_starts`, in the claim's transaction. For the rate
 * scenarios (17 and 19).
 */
export async function noteClaimStarts(db: Queryable): Promise<void> {
  await db.query({
    text: /* sql */ `
CREATE TABLE claim_starts (
  n bigserial PRIMARY KEY, job_id uuid NOT NULL, queue text NOT NULL, tenant text NOT NULL, attempt integer NOT NULL,
  worker_id text, started_at timestamptz NOT NULL);
CREATE FUNCTION note_claim_start() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO public.claim_starts (job_id, queue, tenant, attempt, worker_id, started_at)
  VALUES (NEW.id, NEW.queue, NEW.tenant, NEW.attempts, NEW.worker_id, NEW.started_at);
  RETURN NULL;
END
$$;
CREATE TRIGGER jobs_note_claim_start AFTER UPDATE OF state ON skiplock.jobs
  FOR EACH ROW WHEN (NEW.state = 'running' AND OLD.state IS DISTINCT FROM 'running')
  EXECUTE FUNCTION note_claim_start();`,
    params: [],
  });
}

export interface ClaimStartRecord {
  /** Attempts started: each attempt's last start noted. */
  starts: number;
  /** Claims handed back unstarted, whose attempt did not count. */
  handedBack: number;
  /** Jobs whose starts noted differ from their attempts. */
  attemptsMismatched: number;
  /** (job, attempt) noted twice. */
  notedTwice: number;
  /** Attempts in the handlers' ledger with no start noted. */
  ledgerUnclaimed: number;
  /** Attempts in the handlers' ledger begun before their claim. */
  ledgerBeforeClaim: number;
  laterAttempts: number;
  leasesLapsed: number;
  startsAfterLapse: number;
  startsAfterFailure: number;
  /** Attempts after one a drain's deadline cut off and handed back (its attempt counted). */
  startsAfterRelease: number;
  /** Later attempts after none of those, with their jobs' events: the evidence when the story does not add up. */
  unexplained: unknown;
}

/**
 * Do the starts noted, the jobs' attempts and the handlers' ledger tell one story, and how did the later attempts come about?
 * A claim handed back unstarted (its drain had no slot for it before half its lease ran out) does not count as an
 * attempt: the job's next claim starts the same attempt again. So each attempt is its last start noted, and an
 * attempt noted once more than it was handed back is one run twice.
 */
export async function claimStartRecord(db: Queryable): Promise<ClaimStartRecord> {
  const [record] = await db.query<ClaimStartRecord>({
    text: /* sql */ `
WITH handed_back AS (
  SELECT job_id, attempt, count(*) AS times FROM skiplock.job_events
  WHERE kind = 'released' AND (detail->>'attemptCounted')::boolean IS NOT TRUE
  GROUP BY job_id, attempt
),
noted AS (
  SELECT r.job_id, r.attempt, count(*) - coalesce(max(h.times), 0) AS runs, max(r.n) AS last
  FROM claim_starts r LEFT JOIN handed_back h USING (job_id, attempt)
  GROUP BY r.job_id, r.attempt
),
attempt_starts AS (
  SELECT r.* FROM claim_starts r JOIN noted d ON d.last = r.n WHERE d.runs >= 1
)
SELECT
  (SELECT count(*)::integer FROM attempt_starts) AS starts,
  (SELECT coalesce(sum(times), 0)::integer FROM handed_back) AS "handedBack",
  (SELECT count(*)::integer FROM skiplock.all_jobs a
   WHERE a.attempts <> (SELECT count(*) FROM attempt_starts r WHERE r.job_id = a.id)) AS "attemptsMismatched",
  (SELECT count(*)::integer FROM noted WHERE runs > 1) AS "notedTwice",
  (SELECT count(*)::integer FROM keyed_ledger l
   WHERE NOT EXISTS (SELECT 1 FROM attempt_starts r WHERE r.job_id = l.job_id AND r.attempt = l.attempt))
    AS "ledgerUnclaimed",
  (SELECT count(*)::integer FROM keyed_ledger l JOIN attempt_starts r ON r.job_id = l.job_id AND r.attempt = l.attempt
   WHERE l.started_at < r.started_at) AS "ledgerBeforeClaim",
  (SELECT count(*)::integer FROM attempt_starts WHERE attempt > 1) AS "laterAttempts",
  (SELECT count(*)::integer FROM skiplock.job_events WHERE kind = 'lease_expired') AS "leasesLapsed",
  (SELECT count(*)::integer FROM attempt_starts r
   WHERE EXISTS (SELECT 1 FROM skiplock.job_events e
                 WHERE e.job_id = r.job_id AND e.kind = 'lease_expired' AND e.attempt = r.attempt - 1))
    AS "startsAfterLapse",
  (SELECT count(*)::integer FROM attempt_starts r
   WHERE EXISTS (SELECT 1 FROM skiplock.job_events e
                 WHERE e.job_id = r.job_id AND e.kind = 'failed' AND e.attempt = r.attempt - 1))
    AS "startsAfterFailure",
  (SELECT count(*)::integer FROM attempt_starts r
   WHERE EXISTS (SELECT 1 FROM skiplock.job_events e
                 WHERE e.job_id = r.job_id AND e.kind = 'released' AND e.attempt = r.attempt - 1
                   AND (e.detail->>'attemptCounted')::boolean))
    AS "startsAfterRelease",
  (SELECT json_agg(json_build_object('job', r.job_id, 'attempt', r.attempt, 'events',
            (SELECT json_agg(json_build_object('kind', e.kind, 'attempt', e.attempt, 'worker', e.worker_id, 'detail', e.detail) ORDER BY e.id)
             FROM skiplock.job_events e WHERE e.job_id = r.job_id)))
   FROM attempt_starts r WHERE r.attempt > 1 AND NOT EXISTS (
     SELECT 1 FROM skiplock.job_events e WHERE e.job_id = r.job_id AND e.attempt = r.attempt - 1
       AND (e.kind IN ('failed', 'lease_expired') OR (e.kind = 'released' AND (e.detail->>'attemptCounted')::boolean))))
    AS "unexplained"`,
    params: [],
  });
  return record!;
}

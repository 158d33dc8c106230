/**
 * The states of a waiting job, as SQL. The partial indexes jobs_waiting_idx
 * and jobs_expiring_idx (migrations/0001_schema.sql) cover exactly the rows
 * this predicate selects, and Postgres uses a partial index only for a query
 * whose WHERE it can prove implies the index's: a statement that looks for
 * waiting jobs says it with this, so it stays the same list as the indexes'.
 * Changing the list means a migration that rebuilds both indexes.
 */
export const WAITING_STATE = /* sql */ `state IN ('scheduled', 'queued', 'retrying')`;

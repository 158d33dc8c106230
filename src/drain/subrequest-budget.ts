import type { Db, Query, Row } from '../db/types.js';

/** A statement or fetch refused because the invocation's cap is reached: the platform would fail it anyway. */
export class SubrequestLimitError extends Error {
  override readonly name = 'SubrequestLimitError';
  constructor(limit: number) {
    super(`this drain has made its ${limit} subrequests (SUBREQUEST_LIMIT): nothing more is sent`);
  }
}

/** What a drain must still send after a claim: the hand-back of what it could not start. */
const HAND_BACK = 1;
/** The claim statement itself. */
const CLAIM = 1;

/**
 * The subrequests one invocation may make (Workers cap them per invocation:
 * 50 on the Free plan, 1,000 by default on Paid, and every Neon HTTP
 * statement is one). It counts what is sent and refuses to send past the cap,
 * and it holds a reserve for the jobs the drain has started: each may still
 * need its outcome written, its heartbeats and its handler's own subrequests.
 * The drain starts a job only when its reserve fits and claims only while one
 * more job would, so it stops with room to finish what it holds.
 */
export class SubrequestBudget {
  private sentCount = 0;
  private reservedCount = 0;

  constructor(readonly limit: number) {}

  /** Subrequests sent so far. */
  get sent(): number {
    return this.sentCount;
  }

  /** Counts one subrequest about to be sent; throws SubrequestLimitError instead when none is left. */
  spend(): void {
    if (this.sentCount >= this.limit) throw new SubrequestLimitError(this.limit);
    this.sentCount += 1;
  }

  /** Sets `count` aside for work already committed to; false (and nothing set aside) when it does not fit. */
  tryReserve(count: number): boolean {
    if (this.sentCount + this.reservedCount + count > this.limit) return false;
    this.reservedCount += count;
    return true;
  }

  /** Gives back what `tryReserve` set aside, once spent or no longer needed. */
  release(count: number): void {
    this.reservedCount = Math.max(0, this.reservedCount - count);
  }

  /** Counts subrequests made where this budget could not see them (a handler's declared fetches), as sent. */
  countUnseen(count: number): void {
    this.sentCount += count;
  }

  /** How many jobs costing `perJob` each a claim may take now, leaving room for the claim and a hand-back. */
  affordableJobs(perJob: number): number {
    const room = this.limit - this.sentCount - this.reservedCount - CLAIM - HAND_BACK;
    return Math.max(0, Math.floor(room / Math.max(1, perJob)));
  }

  /** The same database, with every statement counted (over Neon HTTP each is a subrequest). */
  countStatements(db: Db): Db {
    return {
      query: async <R = Row>(query: Query): Promise<R[]> => {
        this.spend();
        return db.query<R>(query);
      },
      transaction: async (queries: readonly Query[]) => {
        this.spend();
        return db.transaction(queries);
      },
      close: () => db.close(),
    };
  }
}

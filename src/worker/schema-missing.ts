import { DatabaseError } from '../db/errors.js';
import type { Db, Query, Queryable, Row, SessionDb } from '../db/types.js';
import { schemaMissingProblem } from '../http/problem.js';

/** SQLSTATEs of a statement naming what the migrations make: no such schema, table or function. */
const UNDEFINED_OBJECT = new Set(['3F000', '42P01', '42883']);

/** A statement failed because the database has no skiplock schema (its messages name `skiplock.`). */
function isSchemaMissing(error: unknown): boolean {
  return error instanceof DatabaseError && UNDEFINED_OBJECT.has(error.code ?? '') && /\bskiplock\b/.test(error.message);
}

/** Runs `work`; a failure from a missing schema becomes the API's `schema-missing` problem, its line given to `report`. */
async function answered<T>(work: () => Promise<T>, report: (line: string) => void): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (!isSchemaMissing(error)) throw error;
    const problem = schemaMissingProblem();
    report(`skiplock: ${problem.message}`);
    throw problem;
  }
}

/**
 * The request database, with a failure that comes from a missing schema
 * answered as the one-line `schema-missing` problem (503: run `skiplock
 * migrate`) instead of a 500, and reported.
 */
export function requestDbAnsweringSchemaMissing(db: Db, report: (line: string) => void): Db {
  return {
    query: <R = Row>(query: Query) => answered(() => db.query<R>(query), report),
    transaction: (queries: readonly Query[]) => answered(() => db.transaction(queries), report),
    close: () => db.close(),
  };
}

/** The same for the session database. */
export function sessionDbAnsweringSchemaMissing(db: SessionDb, report: (line: string) => void): SessionDb {
  return {
    ...requestDbAnsweringSchemaMissing(db, report),
    withTransaction: <T>(work: (tx: Queryable) => Promise<T>) => answered(() => db.withTransaction(work), report),
  };
}

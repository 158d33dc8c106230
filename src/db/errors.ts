/**
 * Errors from any driver, in one shape. Postgres errors keep their SQLSTATE
 * (`code`) so callers can branch on it (for example 23505, unique violation)
 * without knowing which client raised it.
 */
export class DatabaseError extends Error {
  override readonly name = 'DatabaseError';
  /** SQLSTATE, when the server answered with an error. */
  readonly code: string | undefined;
  readonly detail: string | undefined;
  readonly constraint: string | undefined;
  /** True when the database could not be reached or the connection broke. */
  readonly unavailable: boolean;

  constructor(
    message: string,
    fields: { code?: string; detail?: string; constraint?: string; unavailable?: boolean; cause?: unknown },
  ) {
    super(message, { cause: fields.cause });
    this.code = fields.code;
    this.detail = fields.detail;
    this.constraint = fields.constraint;
    this.unavailable = fields.unavailable ?? false;
  }
}

interface PostgresErrorFields {
  message?: unknown;
  code?: unknown;
  detail?: unknown;
  constraint?: unknown;
}

const SQLSTATE = /^[0-9A-Z]{5}$/;

/** SQLSTATE classes that mean "the server or the link is gone", not "your query is wrong". */
const UNAVAILABLE_CLASSES = ['08', '53', '57P'];

function asString(value: unknown): string | undefined {
  return typeof value === 'string' && value !== '' ? value : undefined;
}

/**
 * Converts whatever a driver threw into a DatabaseError. `pg`, Neon's Pool and
 * Neon's HTTP `NeonDbError` all carry the Postgres fields under the same names;
 * network failures carry Node error codes (ECONNREFUSED) or none at all.
 */
export function toDatabaseError(error: unknown): DatabaseError {
  if (error instanceof DatabaseError) return error;
  const fields = (typeof error === 'object' && error !== null ? error : {}) as PostgresErrorFields;
  const message = asString(fields.message) ?? String(error);
  const rawCode = asString(fields.code);
  const sqlstate = rawCode !== undefined && SQLSTATE.test(rawCode) ? rawCode : undefined;
  const unavailable =
    sqlstate === undefined
      ? true
      : UNAVAILABLE_CLASSES.some((prefix) => sqlstate.startsWith(prefix));
  return new DatabaseError(message, {
    code: sqlstate,
    detail: asString(fields.detail),
    constraint: asString(fields.constraint),
    unavailable,
    cause: error,
  });
}

/** Runs a driver call and rethrows its failure as a DatabaseError. */
export async function translateErrors<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (error) {
    throw toDatabaseError(error);
  }
}

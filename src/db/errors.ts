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
  /**
   * True when the database could not be reached or the connection broke (a
   * SQLSTATE of class 08, 53 or 57P, or a driver's connection failure); false
   * for anything else, a driver's own bug included.
   */
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

/** Node's codes for a connection that could not be made or that broke. */
const CONNECTION_ERROR_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'EHOSTDOWN',
  'ENETUNREACH',
  'ENETDOWN',
  'ENOTFOUND',
  'EAI_AGAIN',
]);

/**
 * What the drivers say, without a SQLSTATE, when the link failed: pg and
 * Neon's Pool ("Connection terminated unexpectedly", a connect timeout, a
 * client "not queryable" after one), Neon's HTTP driver ("Error connecting
 * to database: fetch failed", or a 5xx from Neon's proxy), Neon's WebSocket,
 * and the Workers runtime ("Network connection lost").
 */
const CONNECTION_FAILURE_MESSAGES =
  /connection terminated|connection ended unexpectedly|timeout exceeded when trying to connect|not queryable|error connecting to database|all attempts to open a websocket|fetch failed|network connection lost|socket hang up|server error \(http status 5\d\d\)/i;

/** Whether an error without a SQLSTATE is a connection failure, looking into its causes too. */
function isConnectionFailure(error: unknown, depth = 0): boolean {
  if (typeof error !== 'object' || error === null || depth > 3) return false;
  // A WebSocket's error event (Neon's Pool) is not even an Error: only the network raises one.
  if (typeof Event !== 'undefined' && error instanceof Event) return true;
  const { code, message, cause, sourceError } = error as {
    code?: unknown;
    message?: unknown;
    cause?: unknown;
    sourceError?: unknown;
  };
  if (typeof code === 'string' && CONNECTION_ERROR_CODES.has(code)) return true;
  if (typeof message === 'string' && CONNECTION_FAILURE_MESSAGES.test(message)) return true;
  return isConnectionFailure(cause, depth + 1) || isConnectionFailure(sourceError, depth + 1);
}

function asString(value: unknown): string | undefined {
  return typeof value === 'string' && value !== '' ? value : undefined;
}

/**
 * Converts whatever a driver threw into a DatabaseError. `pg`, Neon's Pool and
 * Neon's HTTP `NeonDbError` all carry the Postgres fields under the same names;
 * network failures carry Node error codes (ECONNREFUSED) or only their message.
 */
export function toDatabaseError(error: unknown): DatabaseError {
  if (error instanceof DatabaseError) return error;
  const fields = (typeof error === 'object' && error !== null ? error : {}) as PostgresErrorFields;
  const message = asString(fields.message) ?? String(error);
  const rawCode = asString(fields.code);
  const sqlstate = rawCode !== undefined && SQLSTATE.test(rawCode) ? rawCode : undefined;
  const unavailable =
    sqlstate === undefined
      ? isConnectionFailure(error)
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

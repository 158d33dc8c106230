/**
 * The Node error code (ECONNREFUSED) or Postgres SQLSTATE of a failure, also
 * when it is wrapped: as the `cause` of a driver's or fetch's error, or inside
 * an AggregateError (Node tries each address of a host).
 */
export function errorCode(error: unknown): string | undefined {
  for (let current = error; typeof current === 'object' && current !== null; ) {
    const { code, cause, errors } = current as { code?: unknown; cause?: unknown; errors?: unknown };
    if (typeof code === 'string') return code;
    current = cause ?? (Array.isArray(errors) ? errors[0] : undefined);
  }
  return undefined;
}

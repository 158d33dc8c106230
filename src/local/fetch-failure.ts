/** Why a `fetch()` failed: it rejects with "fetch failed" and keeps the reason (ECONNREFUSED, ...) as the cause. */
export function fetchFailureReason(error: unknown): string {
  const cause = error instanceof Error ? error.cause : undefined;
  return cause instanceof Error ? cause.message : error instanceof Error ? error.message : String(error);
}

import { SkiplockApiError } from '../http/client.js';
import type { ApiConnection } from './api-connection.js';
import { CliError, EXIT } from './cli-failure.js';
import { errorCode } from './error-code.js';

/**
 * Runs one exchange with the API and says in one line, with the exit code of
 * its kind, why it failed: nothing answering at the URL, something that is
 * not skiplock answering, the key refused or short of a scope, no such thing,
 * or the API's own problem document.
 */
export async function withApi<T>(connection: ApiConnection, exchange: () => Promise<T>): Promise<T> {
  try {
    return await exchange();
  } catch (error) {
    throw explainApiFailure(error, connection);
  }
}

function explainApiFailure(error: unknown, { url, urlSource, keySource }: ApiConnection): unknown {
  if (error instanceof CliError) return error;
  if (error instanceof SkiplockApiError) {
    const { status, problem } = error;
    if (problem.type === undefined) {
      return new CliError(
        `${url} answered ${status}, not as a skiplock API does: check ${urlSource}`,
        EXIT.unreachable,
      );
    }
    const fields = problem.errors?.length
      ? ` (${problem.errors.map((field) => `${field.path}: ${field.message}`).join('; ')})`
      : '';
    const said = `${error.message}${fields}`;
    if (status === 401) return new CliError(`the API refused the key: ${said}; check ${keySource}`, EXIT.refused);
    if (status === 403) return new CliError(`${said}: use a key with that scope`, EXIT.refused);
    if (status === 404) return new CliError(said, EXIT.notFound);
    if (status >= 500) return new CliError(`${said} (request id ${problem.requestId ?? 'unknown'})`, EXIT.failed);
    return new CliError(said, EXIT.failed);
  }
  if (error instanceof SyntaxError) {
    return new CliError(
      `${url} answered something other than a skiplock API's JSON: check ${urlSource}`,
      EXIT.unreachable,
    );
  }
  const reason = unreachableReason(error);
  if (reason !== undefined) {
    return new CliError(
      `cannot reach ${url} (${reason}): is skiplock running there (npm start)? check ${urlSource}`,
      EXIT.unreachable,
    );
  }
  return error;
}

/** Why fetch could not get an answer, when that is what failed. */
function unreachableReason(error: unknown): string | undefined {
  if (error instanceof DOMException && error.name === 'TimeoutError') return 'no answer within 60 s';
  if (!(error instanceof TypeError) || error.message !== 'fetch failed') return undefined;
  switch (errorCode(error)) {
    case 'ECONNREFUSED':
      return 'connection refused';
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return 'unknown host';
    default:
      return errorCode(error) ?? ((error.cause as Error | undefined)?.message || 'fetch failed');
  }
}

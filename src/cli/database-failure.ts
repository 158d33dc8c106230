import type { DatabaseTarget } from './database-url.js';
import { errorCode } from './error-code.js';

/**
 * Says in one line what to fix when connecting to `target` failed, or
 * undefined when the failure is not about connecting. Drivers report these
 * as a Node error code (ECONNREFUSED), possibly wrapped as the `cause` of a
 * DatabaseError or inside an AggregateError (Node tries each address of a
 * host), or as a Postgres SQLSTATE.
 */
export function explainConnectionFailure(error: unknown, target: DatabaseTarget): string | undefined {
  const { host, port, user, database, source } = target;
  const where = `${host}:${port}`;
  switch (errorCode(error)) {
    case 'ECONNREFUSED':
      return `nothing accepts connections at ${where}: start Postgres there or fix the host and port in ${source}`;
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return `the host "${host}" in ${source} is unknown: fix ${source}`;
    case 'ETIMEDOUT':
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
      return `Postgres at ${where} cannot be reached (${errorCode(error)}): check the host in ${source} and the network`;
    case '28P01':
    case '28000':
      return `Postgres at ${where} refused user "${user}" (${messageOf(error)}): fix the user or password in ${source}`;
    case '3D000':
      return `database "${database}" does not exist on ${where}: create it (createdb -h ${host} -p ${port} -U ${user} ${database}) or fix the name in ${source}`;
    case '57P03':
      return `Postgres at ${where} is starting up or shutting down: try again in a moment`;
    default:
      return undefined;
  }
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

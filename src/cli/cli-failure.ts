/**
 * The exit codes of `skiplock`, which scripts may test: each names one kind
 * of failure, and every failure prints one line saying what to fix.
 */
export const EXIT = {
  /** Done, or found. */
  ok: 0,
  /** Anything else that failed: the API refused the request (400, 409, 422, 5xx), a database, a job module. */
  failed: 1,
  /** The command line is wrong: an unknown command or flag, a missing argument, a setting that is not set. */
  usage: 2,
  /** Nothing answers at the URL, or what answers is not a skiplock API. */
  unreachable: 3,
  /** The API refused the key (401) or the key lacks the scope for this (403). */
  refused: 4,
  /** No such job, tenant or key (404), or none this key may see. */
  notFound: 5,
  /** `jobs get --wait`: the job ended failed, cancelled or expired. */
  jobNotSucceeded: 6,
  /** `jobs get --wait --timeout`: the job had not ended in time. */
  timedOut: 7,
} as const;

export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

/** A failure whose one-line message is the answer, with the exit code that says its kind. */
export class CliError extends Error {
  override readonly name = 'CliError';
  constructor(
    message: string,
    readonly exitCode: ExitCode,
  ) {
    super(message);
  }
}

/** A command line that cannot work: exit code 2. */
export function usageFailure(message: string): CliError {
  return new CliError(message, EXIT.usage);
}

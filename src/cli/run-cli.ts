import { CliError, EXIT } from './cli-failure.js';

/**
 * Runs a command-line entry point. A failure is printed as one line that says
 * what to fix (never a stack trace) and the exit code is its CliError's, or
 * 1; otherwise it is `process.exitCode`. The exit is explicit so that a
 * handle left open (an idle keep-alive socket, a library's timer) cannot hold
 * a finished command.
 */
export function runCli(command: string, main: () => Promise<void>): void {
  main().then(
    () => process.exit(),
    (error: unknown) => {
      console.error(`${command}: ${firstLine(error)}`);
      process.exit(error instanceof CliError ? error.exitCode : EXIT.failed);
    },
  );
}

function firstLine(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  return message.split('\n', 1)[0]!.trim();
}

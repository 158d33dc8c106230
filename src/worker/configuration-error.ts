/** A setting that is missing or unreadable: its message is the one line the Worker's log shows. */
export class ConfigurationError extends Error {
  override readonly name = 'ConfigurationError';
  constructor(problem: string) {
    super(`skiplock: ${problem}`);
  }
}

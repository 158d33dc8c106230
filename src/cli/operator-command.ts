import type { ParseArgsConfig } from 'node:util';
import { connect, CONNECTION_OPTIONS, CONNECTION_USAGE, type ApiConnection } from './api-connection.js';
import { withApi } from './api-failure.js';
import { usageFailure, type CliError } from './cli-failure.js';
import { readOptions, type ParsedOptions } from './read-options.js';

/** A command of the `skiplock` bin: its arguments in, its output and exit code out. */
export interface Command {
  run(args: string[]): Promise<void>;
  summary: string;
}

/** What an operator command answers: the API's JSON for `--json`, and its form for people. */
export interface Answer {
  json: unknown;
  human: string;
  /** Printed after the answer, as the one line of a non-zero exit (a job that ended failed). */
  failure?: CliError;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

type Options = NonNullable<ParseArgsConfig['options']>;
type Values<Own extends Options> = ParsedOptions<Own>['values'] & ParsedOptions<typeof CONNECTION_OPTIONS>['values'];

/**
 * An operator command: its own flags beside --url, --api-key and --json, and
 * `positionals` names that must each be given once (an `..._ID` must be a
 * UUID, as the API's ids are, or it is a usage error). It talks to
 * the API only inside `run`, so every failure there comes out as one line with
 * the exit code of its kind.
 */
export function operatorCommand<const Own extends Options>(spec: {
  usage: string;
  options: Own;
  positionals?: readonly string[];
  run(input: { values: Values<Own>; positionals: string[]; connection: ApiConnection }): Promise<Answer>;
}): (args: string[]) => Promise<void> {
  const names = spec.positionals ?? [];
  const usage = `usage: ${spec.usage} ${CONNECTION_USAGE}`;
  return async (args) => {
    const parsed = readOptions(args, { ...spec.options, ...CONNECTION_OPTIONS }, usage, names.length > 0);
    // Both option sets were parsed together; TypeScript cannot spell out their union's values while Own is open.
    const values = parsed.values as Values<Own>;
    const { positionals } = parsed;
    if (positionals.length !== names.length) {
      throw usageFailure(
        `${positionals.length < names.length ? `${names[positionals.length]} is missing` : `unexpected "${positionals[names.length]}"`}; ${usage}`,
      );
    }
    positionals.forEach((value, index) => {
      if (names[index]!.endsWith('_ID') && !UUID.test(value))
        throw usageFailure(`${names[index]} must be an id (a UUID), not "${value}"`);
    });
    const connection = connect(values);
    const answer = await withApi(connection, () => spec.run({ values, positionals, connection }));
    console.log(values.json ? JSON.stringify(answer.json, null, 2) : answer.human);
    if (answer.failure !== undefined) throw answer.failure;
  };
}

/** A command made of subcommands (`skiplock jobs list`): the first argument picks one. */
export function withSubcommands(name: string, subcommands: Record<string, Command>): (args: string[]) => Promise<void> {
  const list = Object.entries(subcommands).map(([sub, command]) => `${name} ${sub}: ${command.summary}`);
  return async ([sub, ...args]) => {
    const command = sub === undefined ? undefined : subcommands[sub];
    if (command === undefined) {
      const said = sub === undefined ? 'a subcommand is missing' : `unknown subcommand "${sub}"`;
      throw usageFailure(`${said}; one of: ${list.join('; ')}`);
    }
    await command.run(args);
  };
}

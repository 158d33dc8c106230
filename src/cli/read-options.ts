import { parseArgs, type ParseArgsConfig } from 'node:util';

type ParsedOptions<Options extends NonNullable<ParseArgsConfig['options']>> = ReturnType<
  typeof parseArgs<{ options: Options; allowPositionals: boolean; strict: true }>
>;

/** Reads a command's flags; a bad one is refused in one line that ends with the usage. */
export function readOptions<const Options extends NonNullable<ParseArgsConfig['options']>>(
  args: string[],
  options: Options,
  usage: string,
  allowPositionals = false,
): ParsedOptions<Options> {
  try {
    return parseArgs({ args, options, allowPositionals, strict: true });
  } catch (error) {
    // parseArgs explains in sentences; the first one names the bad argument.
    throw new Error(`${(error as Error).message.split('. ', 1)[0]}; ${usage}`);
  }
}

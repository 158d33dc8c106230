import { parseArgs, type ParseArgsConfig } from 'node:util';
import { type Json, parsePayloadMatch, type RateLimit, type Retention } from '../engine/index.js';
import { usageFailure } from './cli-failure.js';

export type ParsedOptions<Options extends NonNullable<ParseArgsConfig['options']>> = ReturnType<
  typeof parseArgs<{ options: Options; allowPositionals: boolean; strict: true }>
>;

/** Reads a command's flags; a bad one is refused in one line that ends with the usage (exit code 2). */
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
    throw usageFailure(`${(error as Error).message.split('. ', 1)[0]}; ${usage}`);
  }
}

/** A flag's value as a whole number (up to 9 digits), or a one-line refusal naming the flag. */
export function wholeNumberFlag(value: string, flag: string, orElse = ''): number {
  if (!/^\d{1,9}$/.test(value)) throw usageFailure(`${flag} must be a whole number${orElse}, not "${value}"`);
  return Number(value);
}

/** The same, or null for `none`. */
export function wholeNumberOrNoneFlag(value: string, flag: string): number | null {
  return value === 'none' ? null : wholeNumberFlag(value, flag, ' or none');
}

/** `--retention`: whole seconds (the API refuses under a minute), `none` (no history of succeeded jobs), or `default`. */
export function retentionFlag(value: string, orElse = ', none or default'): Retention | null {
  if (value === 'default') return null;
  if (value === 'none') return 'none';
  return wholeNumberFlag(value, '--retention', orElse);
}

/** `--rate-limit COUNT/SECONDS` (100/60: 100 jobs started per 60 s), or null for `none`; the API judges the numbers. */
export function rateLimitFlag(value: string): RateLimit | null {
  if (value === 'none') return null;
  const match = /^(\d{1,9})\/(\d{1,9})$/.exec(value);
  if (match === null) {
    throw usageFailure(
      `--rate-limit must be COUNT/SECONDS (100/60: 100 jobs started per 60 s) or none, not "${value}"`,
    );
  }
  return { count: Number(match[1]), perSeconds: Number(match[2]) };
}

/** A flag's value as a JSON object (a payload match), or a one-line refusal naming the flag. */
export function jsonObjectFlag(value: string, flag: string): { [key: string]: Json } {
  const match = parsePayloadMatch(value);
  if (match === undefined) {
    throw usageFailure(`${flag} must be a JSON object the payload contains, like '{"customer":42}', not ${value}`);
  }
  return match;
}

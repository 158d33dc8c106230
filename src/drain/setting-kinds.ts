import { z } from 'zod';

/**
 * What one setting takes: how its variable's text is read, how an option
 * given in code is checked, and the words for both (in refusals and in
 * docs/configuration.md), so they cannot disagree.
 */
export interface SettingKind<T> {
  /** What the variable accepts, as a refusal and the docs say it: "a whole number from 1 to 50". */
  readonly accepts: string;
  /** What an option given in code accepts, when it differs from the variable (another unit). */
  readonly acceptsInCode?: string;
  /** The variable's text, trimmed and not empty, read into a value. */
  readonly fromText: z.ZodType<T, string>;
  /** An option's value, checked (and trimmed, for text). */
  readonly fromCode: z.ZodType<T>;
  /** A value as its variable spells it (the docs' defaults). */
  show(value: T): string;
}

interface Words<T> {
  readonly accepts: string;
  readonly acceptsInCode?: string;
  show(value: T): string;
}

interface Schemas<T> {
  readonly fromText: z.ZodType<T, string>;
  readonly fromCode: z.ZodType<T>;
}

/**
 * A kind whose schemas are made when a setting of it is first read: the
 * settings' tables are built as their modules load (a Worker's startup), the
 * schemas only when the settings are resolved.
 */
function kind<T>(words: Words<T>, schemas: () => Schemas<T>): SettingKind<T> {
  let made: Schemas<T> | undefined;
  return {
    ...words,
    get fromText() {
      made ??= schemas();
      return made.fromText;
    },
    get fromCode() {
      made ??= schemas();
      return made.fromCode;
    },
  };
}

interface Range {
  min: number;
  max?: number;
}

/** A number within the range, fractions too (seconds, milliseconds). */
export function number(range: Range): SettingKind<number> {
  return numberKind(range, false, 1);
}

export function wholeNumber(range: Range): SettingKind<number> {
  return numberKind(range, true, 1);
}

/** A whole number within the range, or one word (`auto`) for a value the program chooses as it runs. */
export function wholeNumberOr<const Word extends string>(word: Word, range: Range): SettingKind<number | Word> {
  const whole = wholeNumber(range);
  return kind<number | Word>(
    { accepts: `${whole.accepts}, or ${word}`, show: (value) => (value === word ? word : whole.show(value as number)) },
    () => ({
      fromText: z.union([z.string().toLowerCase().pipe(z.literal(word)), whole.fromText]),
      fromCode: z.union([z.literal(word), whole.fromCode]),
    }),
  );
}

/** A number of seconds in its variable, of milliseconds as an option in code (`shutdownGraceMs`). */
export function secondsAsMilliseconds(range: Range): SettingKind<number> {
  return numberKind(range, false, 1000);
}

function numberKind(
  { min, max = Number.POSITIVE_INFINITY }: Range,
  integer: boolean,
  scale: number,
): SettingKind<number> {
  const within = (factor: number) => {
    const kind = integer ? z.int() : z.number();
    return Number.isFinite(max) ? kind.min(min * factor).max(max * factor) : kind.min(min * factor);
  };
  const words = (factor: number) =>
    `${integer ? 'a whole number' : 'a number'} ${Number.isFinite(max) ? `from ${min * factor} to ${max * factor}` : `from ${min * factor}`}`;
  return kind(
    {
      accepts: words(1),
      ...(scale === 1 ? {} : { acceptsInCode: `${words(scale)} (milliseconds)` }),
      show: (value) => String(value / scale),
    },
    () => ({
      fromText: z
        .string()
        .transform(Number)
        .pipe(within(1))
        .transform((value) => value * scale),
      fromCode: within(scale),
    }),
  );
}

/** A switch: `on` or `off`, or the words given (SKIPLOCK_DEV takes 1 and 0 only). */
export function onOff(
  words: { on: readonly [string, ...string[]]; off: readonly [string, ...string[]] } = DEFAULT_SWITCH_WORDS,
): SettingKind<boolean> {
  const others = words.on.slice(1).map((on, index) => `${on} or ${words.off[index + 1]}`);
  return kind(
    {
      accepts: `${words.on[0]} or ${words.off[0]}${others.length > 0 ? ` (also ${others.join(', ')})` : ''}`,
      show: (value) => (value ? words.on[0] : words.off[0]),
    },
    () => ({
      fromText: z
        .string()
        .toLowerCase()
        .pipe(z.enum([...words.on, ...words.off]))
        .transform((word) => words.on.includes(word)),
      fromCode: z.boolean(),
    }),
  );
}

const DEFAULT_SWITCH_WORDS = { on: ['on', '1', 'true'], off: ['off', '0', 'false'] } as const;

/** One of a few words (`free` or `paid`), in any case. */
export function oneOf<const Word extends string>(words: readonly [Word, ...Word[]]): SettingKind<Word> {
  return kind(
    {
      accepts: words.length === 1 ? words[0] : `${words.slice(0, -1).join(', ')} or ${words[words.length - 1]}`,
      show: (value) => value,
    },
    () => ({ fromText: z.string().toLowerCase().pipe(z.enum(words)), fromCode: z.enum(words) }),
  );
}

/** Comma-separated entries, each checked by the schema `entry` makes; blanks between commas are dropped. */
export function list(entry: () => z.ZodType<string, string>, accepts: string): SettingKind<readonly string[]> {
  return kind({ accepts, show: (value) => value.join(',') }, () => {
    const entries = z.array(z.string().trim()).transform((all) => all.filter((each) => each !== ''));
    return {
      fromText: z
        .string()
        .transform((text) => text.split(','))
        .pipe(entries)
        .pipe(z.array(entry())),
      fromCode: entries.pipe(z.array(entry())),
    };
  });
}

/** Any text (a URL, a secret, a name); trimmed, and unset when empty. */
export function text(accepts: string): SettingKind<string> {
  return kind({ accepts, show: (value) => value }, () => ({ fromText: z.string(), fromCode: z.string().trim() }));
}

import type { z } from 'zod';
import type { SettingKind } from './setting-kinds.js';

/**
 * A setting's one definition: its variable, its option in code (its key in
 * its group), what it accepts, its default, and a line saying what it does.
 * The Worker's and the Node worker's option and variable types, their
 * parsing and refusals, and docs/configuration.md all come from the groups
 * of these (src/drain/settings.ts, src/worker/settings.ts,
 * src/node-worker/settings.ts).
 */
export interface SettingFields<T, Variable extends string> {
  /** Its environment variable: a wrangler var or secret, or a Node process's. */
  readonly variable: Variable;
  readonly kind: SettingKind<T>;
  /** One line for docs/configuration.md. */
  readonly description: string;
  /** Set with `wrangler secret put`, never in wrangler.toml; `npm start` does not pass it on. */
  readonly secret?: true;
  /** A variable with no option in code. */
  readonly option?: false;
}

export interface SettingWithDefault<T, Variable extends string = string> extends SettingFields<T, Variable> {
  /** Its kind alone says its type (a default of `'free'` would make a plan any string). */
  readonly default: NoInfer<T>;
}

/** A setting whose default follows other settings of its group: the subrequest cap follows the plan. */
export interface SettingWithDerivedDefault<T, Variable extends string = string> extends SettingFields<T, Variable> {
  readonly defaultFrom: DerivedDefault<T>;
}

export interface DerivedDefault<T> {
  /** How the docs say it: "50 (free), 1000 (paid)". */
  readonly shown: string;
  of(values: Readonly<Record<string, unknown>>): T;
}

export interface SettingWithoutDefault<T, Variable extends string = string> extends SettingFields<T, Variable> {
  /** What leaving it unset means, for the docs: "required", "none: the http job calls nowhere". */
  readonly unset: string;
}

export type Setting<T, Variable extends string = string> =
  | SettingWithDefault<T, Variable>
  | SettingWithDerivedDefault<T, Variable>
  | SettingWithoutDefault<T, Variable>;

/** A setting, typed: its default must be a value of its kind. */
export function setting<T, Variable extends string>(
  fields: SettingWithDefault<T, Variable>,
): SettingWithDefault<T, Variable>;
export function setting<T, Variable extends string>(
  fields: SettingWithDerivedDefault<T, Variable>,
): SettingWithDerivedDefault<T, Variable>;
export function setting<T, Variable extends string>(
  fields: SettingWithoutDefault<T, Variable>,
): SettingWithoutDefault<T, Variable>;
export function setting<T, Variable extends string>(fields: Setting<T, Variable>): Setting<T, Variable> {
  return fields;
}

/** Settings by option name. */
// biome-ignore lint/suspicious/noExplicitAny: a setting of any value type (its parse is contravariant)
export type SettingGroup = Readonly<Record<string, Setting<any>>>;

type ValueOf<S> = S extends { readonly kind: SettingKind<infer T> } ? T : never;

/** A group's values once read: those without a default may be undefined. */
export type SettingValues<G extends SettingGroup> = {
  // biome-ignore lint/suspicious/noExplicitAny: matches a setting without a default, whatever its value type
  -readonly [Key in keyof G]: G[Key] extends SettingWithoutDefault<any> ? ValueOf<G[Key]> | undefined : ValueOf<G[Key]>;
};

/** A group's options in code, each optional. */
export type SettingOptions<G extends SettingGroup> = {
  [Key in keyof G as G[Key] extends { readonly option: false } ? never : Key]?: ValueOf<G[Key]> | undefined;
};

/** A group's variables, as strings (wrangler vars and secrets are). */
export type SettingVariables<G extends SettingGroup> = {
  [Key in keyof G as G[Key]['variable']]?: string;
};

/**
 * Each setting of the group: its option when given in code, else its
 * variable, else its default. An option is checked as the variable is, and
 * a value neither can take is refused in one line naming it and what it
 * accepts (`DRAIN_CONCURRENCY must be a whole number from 1 to 50, not "lots"`).
 */
export function readSettings<G extends SettingGroup>(
  group: G,
  env: object,
  options: SettingOptions<G> = {},
): SettingValues<G> {
  const values: Record<string, unknown> = {};
  const derived: Array<[string, DerivedDefault<unknown>]> = [];
  for (const [key, each] of Object.entries(group)) {
    const option = each.option === false ? undefined : (options as Record<string, unknown>)[key];
    let value =
      option !== undefined
        ? checked(each.kind.fromCode, option, key, each.kind.acceptsInCode ?? each.kind.accepts, JSON.stringify)
        : fromVariable(each, (env as Readonly<Record<string, unknown>>)[each.variable]);
    // Blank text is unset, in an option as in a variable.
    if (value === '') value = undefined;
    if (value === undefined && 'default' in each) value = each.default;
    if (value === undefined && 'defaultFrom' in each) derived.push([key, each.defaultFrom]);
    values[key] = value;
  }
  for (const [key, fallback] of derived) values[key] = fallback.of(values);
  return values as SettingValues<G>;
}

function fromVariable(each: Setting<unknown>, raw: unknown): unknown {
  // A wrangler var may be a JSON number or boolean as well as a string.
  const text = raw === undefined || raw === null ? '' : String(raw).trim();
  if (text === '') return undefined;
  return checked(each.kind.fromText, text, each.variable, each.kind.accepts, (value) => `"${String(value)}"`);
}

/** The value read by the schema, or one line naming the setting, what it takes, and the value (the entry, in a list) it could not. */
function checked(
  schema: z.ZodType,
  value: unknown,
  name: string,
  accepts: string,
  quote: (value: unknown) => string,
): unknown {
  const result = schema.safeParse(value, { reportInput: true });
  if (result.success) return result.data;
  const issue = result.error.issues[0]!;
  const wrong = issue.path.length > 0 ? issue.input : value;
  throw new Error(`${name} must be ${accepts}, not ${quote(wrong)}`);
}

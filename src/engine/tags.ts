import { InvalidInputError } from './errors.js';
import type { Json } from './types.js';

/** The most tags one job carries. */
export const MAX_TAGS = 16;

/**
 * A tag: 1 to 64 characters of A-Z a-z 0-9 _ . : / = -, starting with a
 * letter or digit (`env=prod`, `customer:42`, `v1.2`). skiplock.is_tag says
 * the same for what SQL enqueues.
 */
// biome-ignore lint/complexity/noUselessEscapeInRegex: a pattern attribute (the dashboard's) compiles the source with the v flag, which needs both.
export const TAG_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.:\/=\-]{0,63}$/;

/** The syntax of a tag, as refusals describe it. */
export const TAG_SYNTAX = '1 to 64 of A-Z a-z 0-9 _ . : / = -, starting with a letter or digit';

/** Refuses a value that is not a tag, naming the field. */
export function checkTag(tag: unknown, field: string): string {
  if (typeof tag !== 'string' || !TAG_PATTERN.test(tag)) {
    throw new InvalidInputError(`${field}: a tag is ${TAG_SYNTAX}, not ${JSON.stringify(tag)}`, field);
  }
  return tag;
}

/**
 * A job's tags as stored: each once, in the order given (the definition's
 * first), at most MAX_TAGS; refuses a bad one by the field's name.
 */
export function jobTags(given: readonly unknown[], field: string): string[] {
  if (!Array.isArray(given)) throw new InvalidInputError(`${field} must be an array of tags`, field);
  const tags = [...new Set(given.map((tag, index) => checkTag(tag, `${field}.${index}`)))];
  if (tags.length > MAX_TAGS) {
    throw new InvalidInputError(`${field}: a job carries at most ${MAX_TAGS} tags, not ${tags.length}`, field);
  }
  return tags;
}

/** A payload match: a JSON object the job's payload contains (jsonb @>). Refuses anything else by name. */
export function checkPayloadMatch(match: unknown, field: string): { [key: string]: Json } {
  if (typeof match !== 'object' || match === null || Array.isArray(match)) {
    throw new InvalidInputError(`${field} must be a JSON object the payload contains, like {"customer":42}`, field);
  }
  return match as { [key: string]: Json };
}

/** A payload match written as JSON text (a query string, a flag): the object, or undefined when it is none. */
export function parsePayloadMatch(text: string): { [key: string]: Json } | undefined {
  try {
    const match: unknown = JSON.parse(text);
    return typeof match === 'object' && match !== null && !Array.isArray(match)
      ? (match as { [key: string]: Json })
      : undefined;
  } catch {
    return undefined;
  }
}

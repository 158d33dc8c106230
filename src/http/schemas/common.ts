import { z } from '@hono/zod-openapi';
import { type Json, MAX_TAGS, parsePayloadMatch, TAG_PATTERN, TAG_SYNTAX } from '../../engine/index.js';
import { LIMITS } from '../limits.js';

/**
 * Queue, type, tenant and worker names: what the database accepts (1 to 128
 * characters) minus control characters and unpaired surrogates, which
 * Postgres text cannot hold or logs would mangle.
 */
export const NameSchema = z
  .string()
  .min(1)
  .max(128)
  .regex(/^[^\p{Cc}\p{Cs}]+$/u, 'must not contain control characters or unpaired surrogates');

export const UuidSchema = z.uuid();

/** An ISO-8601 timestamp as the API writes them: UTC, milliseconds, `Z`. */
export const TimestampSchema = z.string().openapi({ format: 'date-time', example: '2026-05-01T12:00:00.000Z' });

/** An ISO-8601 timestamp a client sends; any offset. */
export const DateTimeInputSchema = z.iso.datetime({ offset: true });

/** A whole number between `min` and `max`. */
export function intSchema(min: number, max: number) {
  return z.int().min(min).max(max);
}

/** A delay or time-to-live in seconds, fractions allowed. */
export const DelaySecondsSchema = z.number().min(0).max(LIMITS.maxDelaySeconds);

export const LeaseSecondsSchema = intSchema(1, LIMITS.maxLeaseSeconds);

/** A query-string number: decimal digits only, so `1e3`, `0x10` or `NaN` never sneak in. */
export function queryNumberSchema(min: number, max: number, options: { integer?: boolean } = {}) {
  const digits = options.integer ? /^\d{1,9}$/ : /^\d{1,9}(\.\d{1,3})?$/;
  return z
    .string()
    .regex(digits, options.integer ? 'must be a whole number' : 'must be a number')
    .transform(Number)
    .pipe(z.number().min(min).max(max));
}

/** Why a JSON value is refused, walking it without recursion (a deep value must not blow the stack). */
function jsonValueProblem(value: unknown): { message: string; tooLarge?: boolean } | undefined {
  const pending: Array<{ value: unknown; depth: number }> = [{ value, depth: 0 }];
  for (let item = pending.pop(); item !== undefined; item = pending.pop()) {
    if (item.depth > LIMITS.maxJsonDepth) return { message: `must not nest deeper than ${LIMITS.maxJsonDepth} levels` };
    if (typeof item.value === 'string' && !storableText(item.value)) {
      return { message: 'strings must not contain \\u0000 or unpaired surrogates' };
    }
    if (typeof item.value !== 'object' || item.value === null) continue;
    for (const [key, child] of Object.entries(item.value)) {
      if (!storableText(key)) return { message: 'keys must not contain \\u0000 or unpaired surrogates' };
      pending.push({ value: child, depth: item.depth + 1 });
    }
  }
  const bytes = new TextEncoder().encode(JSON.stringify(value)).length;
  if (bytes > LIMITS.maxJsonBytes) {
    return { message: `is ${bytes} bytes of JSON; at most ${LIMITS.maxJsonBytes} are accepted`, tooLarge: true };
  }
  return undefined;
}

/** Postgres jsonb refuses \u0000 and unpaired surrogates. */
function storableText(text: string): boolean {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: NUL is what it refuses
  return !/[\u0000\p{Cs}]/u.test(text);
}

/**
 * Any JSON value (a payload, result, error or progress), capped in depth and
 * size. A value over the size cap is marked `tooLarge`, which the API answers
 * with 413 instead of 400.
 */
export const JsonValueSchema = z
  .unknown()
  .superRefine((value, ctx) => {
    const problem = jsonValueProblem(value);
    if (problem === undefined) return;
    ctx.addIssue({ code: 'custom', message: problem.message, params: { tooLarge: problem.tooLarge ?? false } });
  })
  // Parsed from a JSON body and checked above, so it is JSON.
  .transform((value) => value as Json)
  .openapi({ description: 'Any JSON value', example: { any: 'json' } });

/** Whether a validation issue is JsonValueSchema's size cap. */
export function isTooLargeIssue(issue: z.core.$ZodIssue): boolean {
  return issue.code === 'custom' && issue.params?.tooLarge === true;
}

/** A job's tag (see `EnqueueInput.tags`). */
export const TagSchema = z.string().regex(TAG_PATTERN, `a tag is ${TAG_SYNTAX}`).openapi({ example: 'env=prod' });

/** A job's tags, as an enqueue gives them. */
export const TagsSchema = z
  .array(TagSchema)
  .max(MAX_TAGS)
  .describe(`Up to ${MAX_TAGS} tags (${TAG_SYNTAX}), each kept once, after its job definition's own.`);

/** Tags in a query string: `tag=a&tag=b` (one or more), every one of them required. */
export const TagQuerySchema = z
  .union([TagSchema, z.array(TagSchema).min(1).max(MAX_TAGS)])
  .transform((tags) => (typeof tags === 'string' ? [tags] : tags))
  .describe('Jobs carrying this tag; repeat it (`tag=a&tag=b`) for jobs carrying all of them.');

/** A payload match in a query string: a JSON object the job's payload contains (jsonb `@>`). */
export const PayloadMatchQuerySchema = z
  .string()
  .max(4096)
  .transform((text, ctx) => {
    const match = parsePayloadMatch(text);
    if (match !== undefined) return match;
    ctx.addIssue({ code: 'custom', message: 'must be a JSON object the payload contains, like {"customer":42}' });
    return z.NEVER;
  })
  .describe('Jobs whose payload contains this JSON object (jsonb containment), like `{"customer":42}`.');

/** A payload match in a request body. */
export const PayloadMatchSchema = z
  .record(z.string(), JsonValueSchema)
  .describe('Jobs whose payload contains this JSON object (jsonb containment), like `{"customer":42}`.');

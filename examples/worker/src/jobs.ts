import { z } from 'zod';
import { defineJob, definePeriodicJob, RetryAfterError } from 'skiplock/worker';

/** Sends the welcome email of a new user (here: composes it). */
export const sendWelcome = defineJob(
  'send-welcome',
  z.object({ userId: z.number().int().positive(), locale: z.enum(['en', 'fr']).default('en') }),
  async ({ userId, locale }) => ({
    userId,
    subject: locale === 'fr' ? 'Bienvenue !' : 'Welcome!',
  }),
  { maxAttempts: 5, leaseSeconds: 30 },
);

/** Adds up an invoice's lines; asks to be retried later while the invoice is still open. */
export const totalInvoice = defineJob(
  'total-invoice',
  z.object({
    invoiceId: z.string().min(1),
    lines: z.array(z.object({ cents: z.number().int() })).min(1),
    open: z.boolean().default(false),
  }),
  ({ invoiceId, lines, open }) => {
    if (open) throw new RetryAfterError(60);
    return { invoiceId, totalCents: lines.reduce((sum, line) => sum + line.cents, 0) };
  },
);

/** Fails its first attempt on purpose and succeeds on the retry, which a later drain (a cron tick) runs. */
export const flakyEcho = defineJob(
  'flaky-echo',
  z.object({ message: z.string() }),
  ({ message }, { attempt }) => {
    if (attempt === 1) throw new Error('flaky-echo fails its first attempt on purpose');
    return { message, attempt };
  },
  { maxAttempts: 3, backoff: { baseSeconds: 1, maxSeconds: 2 } },
);

/** Every night at 03:00 UTC: the report of the day before. */
export const nightlyReport = definePeriodicJob({
  name: 'nightly-report',
  cron: '0 3 * * *',
  job: totalInvoice, // the payload is checked against its schema where this compiles
  payload: { invoiceId: 'nightly', lines: [{ cents: 0 }] },
});

export const jobs = [sendWelcome, totalInvoice, flakyEcho];
export const schedules = [nightlyReport];

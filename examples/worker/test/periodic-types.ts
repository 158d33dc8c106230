// Type tests, checked by `npm run typecheck` (tsc): a periodic job's job and payload are its definition's.
import { definePeriodicJob } from 'skiplock/worker';
import { totalInvoice } from '../src/jobs';

// @ts-expect-error -- lines must be an array of { cents }: a wrong payload must fail to compile.
export const wrongPayload = definePeriodicJob({
  name: 'wrong-payload',
  cron: '0 3 * * *',
  job: totalInvoice,
  payload: { invoiceId: 'nightly', lines: 'none' },
});

export const wrongType = definePeriodicJob({
  name: 'wrong-type',
  cron: '0 3 * * *',
  // @ts-expect-error -- no job is defined by this name: a misspelled job must fail to compile.
  job: totalInvoise,
  payload: { invoiceId: 'nightly', lines: [] },
});

// Type tests, checked by `npm run typecheck` (tsc): a periodic job's type and payload are its definition's.
import { definePeriodicJob } from 'skiplock/worker';
import { type jobs, totalInvoice } from '../src/jobs';

// @ts-expect-error -- lines must be an array of { cents }: a wrong payload must fail to compile.
export const wrongPayload = definePeriodicJob({
  name: 'wrong-payload',
  cron: '0 3 * * *',
  job: totalInvoice,
  payload: { invoiceId: 'nightly', lines: 'none' },
});

export const wrongDefinition = definePeriodicJob({
  name: 'wrong-definition',
  cron: '0 3 * * *',
  // @ts-expect-error -- no job is defined by this name: a misspelled job must fail to compile.
  job: totalInvoise,
  payload: { invoiceId: 'nightly', lines: [] },
});

// Named by its type, checked against the definitions.
export const namedType = definePeriodicJob<typeof jobs>({
  name: 'named',
  cron: '0 3 * * *',
  type: 'send-welcome',
  payload: { userId: 7 },
});

export const wrongTypeName = definePeriodicJob<typeof jobs>({
  name: 'wrong-type-name',
  cron: '0 3 * * *',
  // @ts-expect-error -- no definition has this type: a misspelled type name must fail to compile.
  type: 'send-welcom',
  payload: { userId: 7 },
});

export const wrongNamedPayload = definePeriodicJob<typeof jobs>({
  name: 'wrong-named-payload',
  cron: '0 3 * * *',
  type: 'send-welcome',
  // @ts-expect-error -- send-welcome's userId is a number: a wrong payload for a named type must fail to compile.
  payload: { userId: 'nope' },
});

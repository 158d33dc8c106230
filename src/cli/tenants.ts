import { successBody } from '../http/client.js';
import type { Tenant } from '../engine/index.js';
import { usageFailure } from './cli-failure.js';
import { operatorCommand, withSubcommands } from './operator-command.js';
import { rateLimitFlag, wholeNumberFlag, wholeNumberOrNoneFlag } from './read-options.js';
import { fields } from './table.js';

const get = operatorCommand({
  usage: 'skiplock tenants get TENANT',
  options: {},
  positionals: ['TENANT'],
  async run({ positionals: [tenant], connection }) {
    const answer = await successBody(connection.api.v1.tenants[':tenant'].$get({ param: { tenant: tenant! } }));
    return { json: answer, human: describeTenant(answer) };
  },
});

const set = operatorCommand({
  usage: 'skiplock tenants set TENANT [--concurrency N|none] [--rate-limit COUNT/SECONDS|none] [--weight N]',
  options: { concurrency: { type: 'string' }, 'rate-limit': { type: 'string' }, weight: { type: 'string' } },
  positionals: ['TENANT'],
  async run({ values, positionals: [tenant], connection }) {
    const given = {
      ...(values.concurrency === undefined
        ? {}
        : { concurrency: wholeNumberOrNoneFlag(values.concurrency, '--concurrency') }),
      ...(values['rate-limit'] === undefined ? {} : { rateLimit: rateLimitFlag(values['rate-limit']) }),
      ...(values.weight === undefined ? {} : { weight: wholeNumberFlag(values.weight, '--weight') }),
    };
    if (Object.keys(given).length === 0)
      throw usageFailure('give at least one of --concurrency, --rate-limit, --weight');
    const route = connection.api.v1.tenants[':tenant'];
    // The API replaces every setting at once; the ones not given here keep their current values.
    const {
      concurrency,
      rateLimit: currentRateLimit,
      weight,
    } = await successBody(route.$get({ param: { tenant: tenant! } }));
    const json = { concurrency, rateLimit: currentRateLimit, weight, ...given };
    const answer = await successBody(route.$put({ param: { tenant: tenant! }, json }));
    return { json: answer, human: describeTenant(answer) };
  },
});

export const tenantsCommand = withSubcommands('tenants', {
  get: { run: get, summary: "a tenant's concurrency, rate limit, weight and running jobs" },
  set: { run: set, summary: "change a tenant's concurrency, rate limit or weight (the others stay)" },
});

function describeTenant(tenant: Tenant): string {
  return fields([
    ['tenant', `${tenant.name}${tenant.custom ? '' : ' (on the defaults)'}`],
    ['concurrency', tenant.concurrency === null ? 'no limit' : `${tenant.concurrency} running at once`],
    [
      'rate limit',
      tenant.rateLimit === null ? 'none' : `${tenant.rateLimit.count} started per ${tenant.rateLimit.perSeconds} s`,
    ],
    ['weight', String(tenant.weight)],
    ['running', String(tenant.running)],
  ]);
}

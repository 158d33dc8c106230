import type { JobTypeRetention } from '../engine/index.js';
import { successBody } from '../http/client.js';
import { usageFailure } from './cli-failure.js';
import { operatorCommand, withSubcommands } from './operator-command.js';
import { retentionFlag } from './read-options.js';
import { fields, table } from './table.js';

/** `skiplock job-types list`: the types with a retention of their own, and who set it. */
const list = operatorCommand({
  usage: 'skiplock job-types list',
  options: {},
  async run({ connection }) {
    const answer = await successBody(connection.api.v1['job-types'].$get());
    if (answer.jobTypes.length === 0) return { json: answer, human: 'no job type has a retention of its own' };
    const rows = answer.jobTypes.map((type) => [
      type.type,
      describeRetention(type.retentionSeconds),
      type.setBy,
      type.updatedAt,
    ]);
    return { json: answer, human: table(['type', 'retention', 'set by', 'updated'], rows) };
  },
});

/** `skiplock job-types set TYPE --retention N|none|default|definition`. */
const set = operatorCommand({
  usage: 'skiplock job-types set TYPE --retention SECONDS|none|default|definition',
  options: { retention: { type: 'string' } },
  positionals: ['TYPE'],
  async run({ values, positionals: [type], connection }) {
    if (values.retention === undefined)
      throw usageFailure('give --retention SECONDS, none, default (its queue’s) or definition (hand it back)');
    const route = connection.api.v1['job-types'][':type'].retention;
    const answer =
      values.retention === 'definition'
        ? await successBody(route.$delete({ param: { type: type! } }))
        : await successBody(
            route.$put({
              param: { type: type! },
              json: { retentionSeconds: retentionFlag(values.retention, ', none, default or definition') },
            }),
          );
    return { json: answer, human: describeJobType(answer) };
  },
});

/** `skiplock job-types list|set`: a job type's retention, from its definition or an operator. */
export const jobTypesCommand = withSubcommands('job-types', {
  list: { run: list, summary: 'the job types with a retention of their own, and who set it' },
  set: {
    run: set,
    summary:
      "set a type's retention as an operator (it wins over the definition), or hand it back: --retention definition",
  },
});

function describeJobType(type: JobTypeRetention): string {
  return fields([
    ['type', type.type],
    ['retention', describeRetention(type.retentionSeconds)],
    [
      'set by',
      type.setBy === 'operator'
        ? 'an operator (the drains leave it until --retention definition)'
        : 'its definition (the drains that run it write it)',
    ],
  ]);
}

function describeRetention(retention: JobTypeRetention['retentionSeconds']): string {
  if (retention === null) return "its queue's, else the default";
  if (retention === 'none') return "none for succeeded jobs (failed ones: its queue's, else the default)";
  return `${retention} s`;
}

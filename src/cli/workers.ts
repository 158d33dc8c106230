import { successBody } from '../http/client.js';
import { operatorCommand, withSubcommands } from './operator-command.js';

const release = operatorCommand({
  usage: 'skiplock workers release WORKER',
  options: {},
  // A worker's id is the name it claims under, not a UUID.
  positionals: ['WORKER'],
  async run({ positionals: [workerId], connection }) {
    const { jobs } = await successBody(
      connection.api.v1.workers[':workerId'].release.$post({ param: { workerId: workerId! } }),
    );
    const human =
      jobs.length === 0
        ? `worker ${workerId} holds no jobs`
        : `handed back ${jobs.length} job${jobs.length === 1 ? '' : 's'} of worker ${workerId}: ${jobs.map((job) => `${job.id} ${job.status}`).join(', ')}`;
    return { json: { jobs }, human };
  },
});

export const workersCommand = withSubcommands('workers', {
  release: { run: release, summary: "hand back every job a crashed worker held, at once (with that worker's own key)" },
});

// An auxiliary Worker of the workerd suite: the consumer of the test queue
// (Miniflare's local Cloudflare Queues). It keeps every message it is given,
// acknowledging each, and answers GET with what it has kept, oldest first.
const kept = [];

export default {
  async queue(batch) {
    for (const message of batch.messages) {
      kept.push({ queue: batch.queue, id: message.id, body: message.body, attempts: message.attempts });
      message.ack();
    }
  },
  async fetch() {
    return Response.json(kept);
  },
};

export interface ServerSentEvent {
  event: string;
  data: string;
  id: string | undefined;
}

/** The events of a text/event-stream response, in order; comments (heartbeats) are skipped. */
export async function* serverSentEvents(response: Response): AsyncGenerator<ServerSentEvent> {
  const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
  let buffered = '';
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      buffered += value;
      let end: number;
      while ((end = buffered.indexOf('\n\n')) >= 0) {
        const block = buffered.slice(0, end);
        buffered = buffered.slice(end + 2);
        const fields = block.split('\n').filter((line) => !line.startsWith(':'));
        if (fields.length === 0) continue;
        const field = (name: string) =>
          fields.filter((line) => line.startsWith(`${name}: `)).map((line) => line.slice(name.length + 2));
        yield { event: field('event')[0] ?? 'message', data: field('data').join('\n'), id: field('id')[0] };
      }
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
}

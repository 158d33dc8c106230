import { createServer, type Server } from 'node:http';
import pg from 'pg';
import { clientQueryable, enqueue, getJob, poolDb } from 'skiplock';
import { confirmOrder } from './jobs.js';

/**
 * POST /orders {"email": "..."}: inserts the order and enqueues its
 * confirmation in one transaction, so the job exists exactly when the order
 * does. GET /jobs/{id}: the job's status and result.
 */
export function createOrderServer(pool: pg.Pool): Server {
  const db = poolDb(pool);
  return createServer(async (request, response) => {
    const reply = (status: number, body: unknown) => {
      response.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    };
    try {
      const url = new URL(request.url ?? '/', 'http://localhost');
      if (request.method === 'POST' && url.pathname === '/orders') {
        const { email, failAfterInsert } = JSON.parse(await readBody(request)) as {
          email: string;
          failAfterInsert?: boolean;
        };
        const client = await pool.connect();
        try {
          await client.query('BEGIN');
          const { rows } = await client.query<{ id: number }>('INSERT INTO orders (email) VALUES ($1) RETURNING id', [
            email,
          ]);
          const orderId = rows[0]!.id;
          const job = await enqueue(clientQueryable(client), confirmOrder, { orderId, email });
          if (failAfterInsert) throw new Error('the order failed after its job was enqueued');
          await client.query('COMMIT');
          return reply(201, { orderId, jobId: job.id });
        } catch (error) {
          await client.query('ROLLBACK');
          throw error;
        } finally {
          client.release();
        }
      }
      const jobPath = /^\/jobs\/([0-9a-f-]{36})$/.exec(url.pathname);
      if (request.method === 'GET' && jobPath) {
        const job = await getJob(db, jobPath[1]!);
        return job === undefined ? reply(404, { error: 'no such job' }) : reply(200, job);
      }
      reply(404, { error: 'not found' });
    } catch (error) {
      reply(500, { error: error instanceof Error ? error.message : String(error) });
    }
  });
}

async function readBody(request: AsyncIterable<Buffer>): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk);
  return Buffer.concat(chunks).toString('utf8');
}

/** `npm start`: the service on PORT (default 3000) over DATABASE_URL. */
if (import.meta.url === `file://${process.argv[1]}`) {
  const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL });
  await pool.query('CREATE TABLE IF NOT EXISTS orders (id serial PRIMARY KEY, email text NOT NULL)');
  createOrderServer(pool).listen(Number(process.env.PORT ?? 3000));
}

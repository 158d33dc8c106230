/**
 * What a workload cost, per job, in the units Cloudflare and Neon bill:
 * the inputs of the cost page (`npm run docs:cost`, docs/cost.md). Every
 * figure is a count or a reading taken around the workload, from its first
 * enqueue until its last job finished.
 */
export interface CostInputs {
  jobs: number;
  /** Requests to the Worker (enqueues) and cron invocations, counted in workerd. */
  workerRequestsPerJob: { http: number; cron: number };
  /** Durable Object requests: the queue clock's, helper starts, helper alarms (each alarm is billed as a request). */
  durableObjectRequestsPerJob: { clock: number; helperStarts: number; helperAlarms: number };
  /** Wall time the Durable Objects were busy with a request or an alarm (their billed duration), ms. */
  durableObjectActiveMsPerJob: { clock: number; helpers: number };
  /** workerd's CPU: the Worker's requests, cron drains and Durable Objects, ms. */
  workerdCpuMsPerJob: number;
  /** The Postgres server's CPU, ms; null when its processes cannot be read here. */
  databaseCpuMsPerJob: number | null;
  /** Requests over HTTP and messages over WebSockets from the Worker to the database (subrequests). */
  databaseTripsPerJob: { http: number; webSocket: number };
  statementsPerJob: number;
  /** skiplock's tables and indexes grown by (what a finished job keeps for the retention), and WAL written, bytes. */
  bytesPerJob: { tablesAndIndexes: number; wal: number };
}

/** The `costInputs` that `npm run bench:workerd` prints: one run's inputs, and where they come from. */
export interface RunCostInputs {
  /** When the run ended (ISO 8601). */
  measuredAt: string;
  /** The command that reproduces it, settings included. */
  command: string;
  /** The server's version: `PostgreSQL 15.20`. */
  postgres: string;
  machine: { cpus: number; model: string; loadAverage: number[] };
  /** How often the harness fires the cron (a deployed Worker's fires once a minute). */
  cronEverySeconds: number;
  /** Worker settings passed on from the environment (DRAIN_FANOUT...). */
  workerVariables: Record<string, string>;
  /** No-op jobs enqueued 1,000 a request and drained by the cron drain and its helpers. */
  noop: CostInputs;
  /** Jobs that wait 50 ms on a timer, likewise. */
  io: CostInputs;
  /** No-op jobs enqueued one a request by 64 clients, started by the fast path. */
  singleEnqueues: CostInputs;
}

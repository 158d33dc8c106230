import { join, relative, resolve } from 'node:path';

/** What `skiplock dev` keeps between runs, all under the project's state folder (`.skiplock/` by default). */
export interface LocalPaths {
  /** The Worker project: the folder with the wrangler config and node_modules. */
  readonly projectDir: string;
  readonly stateDir: string;
  readonly postgresData: string;
  /** The dev admin key, made on the first run. */
  readonly adminToken: string;
  /** The Worker's STATUS_TOKEN_SECRET, made on the first run, so status links survive a restart. */
  readonly statusTokenSecret: string;
  /** The embedded Postgres's superuser password, random, made with its cluster. */
  readonly postgresPassword: string;
  /** The Worker's variables, regenerated on every start. */
  readonly workerVars: string;
  readonly wranglerState: string;
  readonly wranglerLog: string;
}

export function localPaths(projectDir: string, stateDir: string): LocalPaths {
  const project = resolve(projectDir);
  const state = resolve(project, stateDir);
  return {
    projectDir: project,
    stateDir: state,
    postgresData: join(state, 'postgres'),
    adminToken: join(state, 'admin-token'),
    statusTokenSecret: join(state, 'status-token-secret'),
    postgresPassword: join(state, 'postgres-password'),
    workerVars: join(state, 'worker.env'),
    wranglerState: join(state, 'wrangler'),
    wranglerLog: join(state, 'wrangler.log'),
  };
}

/** A path as people see it in messages: relative to the folder they are in when inside it. */
export function shownPath(path: string): string {
  const inside = relative(process.cwd(), path);
  return inside === '' || inside.startsWith('..') ? path : inside;
}

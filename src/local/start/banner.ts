export interface BannerFacts {
  workerUrl: string;
  adminToken: string;
  /** Where the admin key came from, e.g. "ADMIN_TOKEN" or ".skiplock/admin-token". */
  adminTokenSource: string;
  database: string;
  drains: string;
  logFile: string;
  /** SKIPLOCK_DEV=1: the demo jobs are on. */
  demoJobs: boolean;
}

/** What someone who just ran `skiplock dev` needs to use it. */
export function banner(facts: BannerFacts): string {
  const rows: Array<[string, string]> = [
    ['API', facts.workerUrl],
    ['dashboard', `${facts.workerUrl}/`],
    ['admin key', `${facts.adminToken}  (from ${facts.adminTokenSource})`],
    ['database', facts.database],
    ['drains', facts.drains],
    ['Worker log', facts.logFile],
  ];
  const width = Math.max(...rows.map(([label]) => label.length));
  return [
    '',
    `skiplock is running${facts.demoJobs ? ' (dev mode: demo handlers on)' : ''}`,
    ...rows.map(([label, value]) => `  ${label.padEnd(width)}  ${value}`),
    'Ctrl-C stops everything.',
    '',
  ].join('\n');
}

import { graphileWorkerDriver } from './graphile-worker';
import { pgBossDriver } from './pg-boss';
import { skiplockDriver } from './skiplock';
import type { SystemDriver } from './types';

/** skiplock first: every ratio in the report is skiplock / peer. */
export const DRIVERS: readonly SystemDriver[] = [skiplockDriver, pgBossDriver, graphileWorkerDriver];

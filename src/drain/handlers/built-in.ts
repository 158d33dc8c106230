import type { JobDefinition } from '../define-job.js';
import { demoJobs } from './demo.js';
import { httpJob, type HttpJobSettings } from './http.js';

export interface BuiltInJobSettings {
  /** Dev mode (SKIPLOCK_DEV=1, as `npm start` sets it): the demo jobs too. */
  devMode: boolean;
  http: HttpJobSettings;
}

/** The job types the reference Worker and Node worker ship with. */
export function builtInJobs(settings: BuiltInJobSettings): JobDefinition[] {
  return [httpJob(settings.http), ...(settings.devMode ? demoJobs : [])];
}

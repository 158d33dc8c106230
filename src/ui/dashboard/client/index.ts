import { domJs, elementsJs, statusConstantsJs, timeJs } from '../../client/shared';
import { apiJs } from './api';
import { appJs } from './app';
import { chartsJs } from './charts';
import { formatJs } from './format';
import { jobListJs } from './job-list';
import { jobViewJs } from './job-view';
import { noticeJs } from './notice';
import { overviewJs } from './overview';
import { tenantViewJs } from './tenant-view';

/** The dashboard's one inline script: its parts share one function scope; app.js starts it. */
export const dashboardScript = [
  "(() => {\n'use strict';",
  statusConstantsJs,
  domJs,
  elementsJs,
  timeJs,
  formatJs,
  apiJs,
  noticeJs,
  chartsJs,
  overviewJs,
  jobListJs,
  jobViewJs,
  tenantViewJs,
  appJs,
  '})();',
].join('\n');

import { domJs, elementsJs, statusConstantsJs, timeJs } from '../../client/shared.js';
import { apiJs } from './api.js';
import { appJs } from './app.js';
import { chartsJs } from './charts.js';
import { formatJs } from './format.js';
import { jobListJs } from './job-list.js';
import { jobViewJs } from './job-view.js';
import { noticeJs } from './notice.js';
import { overviewJs } from './overview.js';
import { tenantViewJs } from './tenant-view.js';

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

import { Document } from '../document.js';
import { dashboardScript } from '../page-scripts.generated.js';
import { themeCss } from '../theme.js';
import { ConfirmDialog } from './confirm-dialog.js';
import { Header } from './header.js';
import { JobList } from './job-list.js';
import { JobView } from './job-view.js';
import { Overview } from './overview.js';
import { SignIn } from './sign-in.js';
import { dashboardCss } from './styles.js';
import { TenantView } from './tenant-view.js';

/**
 * `GET /`: one page holding every view, hidden until the script shows one.
 * It carries no data: the script reads everything from the JSON API with
 * the signed-in key, so what a key may see is decided by the API alone.
 */
export function DashboardPage({ nonce }: { nonce: string }) {
  return (
    <Document title="skiplock dashboard" nonce={nonce} css={themeCss + dashboardCss} script={dashboardScript}>
      <Header />
      <main id="main">
        <p id="notice" class="notice" role="status" hidden />
        <SignIn />
        <Overview />
        <JobList />
        <JobView />
        <TenantView />
        <datalist id="queue-names" />
        <datalist id="tenant-names" />
      </main>
      <ConfirmDialog />
    </Document>
  );
}

import { Document } from '../document';
import { themeCss } from '../theme';
import { dashboardScript } from './client';
import { ConfirmDialog } from './confirm-dialog';
import { Header } from './header';
import { JobList } from './job-list';
import { JobView } from './job-view';
import { Overview } from './overview';
import { SignIn } from './sign-in';
import { dashboardCss } from './styles';
import { TenantView } from './tenant-view';

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

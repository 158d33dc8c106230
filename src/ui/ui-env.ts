import type { SecureHeadersVariables } from 'hono/secure-headers';
import type { AppEnv } from '../http/context.js';

/** The app's environment, plus the CSP nonce that the page headers make per request. */
export interface UiEnv {
  Bindings: AppEnv['Bindings'];
  Variables: AppEnv['Variables'] & SecureHeadersVariables;
}

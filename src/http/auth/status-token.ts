import type { ApiSettings } from '../context.js';
import { base64url, fromBase64url, hmacSha256Matches, hmacSha256Signer, keptPerSecret } from './crypto.js';

/**
 * Browser status tokens: `v1.<expiry in unix seconds>.<signature>`, where the
 * signature is HMAC-SHA256 over the job id and the expiry. The job id is not in
 * the token: it is the id in the URL, so a token opens exactly one job.
 */

/** How long a statusUrl works: long enough for a user to follow a slow job. */
export const STATUS_TOKEN_TTL_SECONDS = 24 * 60 * 60;

const TOKEN_SHAPE = /^v1\.(\d{1,12})\.([A-Za-z0-9_-]{43})$/;

function signedText(jobId: string, expiresAtSeconds: number): string {
  // Ids are compared lowercase, as Postgres compares uuids.
  return `skiplock status token v1|${jobId.toLowerCase()}|${expiresAtSeconds}`;
}

export type StatusTokenSigner = (jobId: string, expiresAtSeconds: number) => Promise<string>;

export async function statusTokenSigner(secret: string): Promise<StatusTokenSigner> {
  const sign = await hmacSha256Signer(secret);
  return async (jobId, expiresAtSeconds) =>
    `v1.${expiresAtSeconds}.${base64url(await sign(signedText(jobId, expiresAtSeconds)))}`;
}

/** True when `token` was signed with `secret` for `jobId` and has not expired. */
export async function verifyStatusToken(
  secret: string,
  jobId: string,
  token: string,
  nowMs = Date.now(),
): Promise<boolean> {
  const match = TOKEN_SHAPE.exec(token);
  if (!match) return false;
  const expiresAtSeconds = Number(match[1]);
  if (expiresAtSeconds * 1000 <= nowMs) return false;
  const signature = fromBase64url(match[2]!);
  return signature !== undefined && hmacSha256Matches(secret, signedText(jobId, expiresAtSeconds), signature);
}

/**
 * The signing secret: STATUS_TOKEN_SECRET, or under `npm start` one derived
 * from ADMIN_TOKEN, so local development needs no extra secret. Undefined when
 * neither applies: then no status token can be made or accepted.
 */
export async function statusTokenSecret(settings: ApiSettings): Promise<string | undefined> {
  if (settings.statusTokenSecret) return settings.statusTokenSecret;
  if (settings.devMode && settings.adminToken) return devSecret(settings.adminToken);
  return undefined;
}

/** Derived, not ADMIN_TOKEN itself: a leaked signing secret must not be an admin key. */
const devSecret = keptPerSecret(async (adminToken) => {
  const sign = await hmacSha256Signer(adminToken);
  return base64url(await sign('skiplock status token secret'));
});

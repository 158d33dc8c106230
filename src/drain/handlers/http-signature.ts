/**
 * Signatures of `http` job deliveries in the Standard Webhooks format
 * (standardwebhooks.com), so receivers verify them with its libraries:
 *
 *   webhook-id:        the job id (the same on every attempt: receivers drop repeats by it)
 *   webhook-timestamp: unix seconds of this attempt (verifiers refuse one off by more than 5 minutes)
 *   webhook-signature: v1,<base64 HMAC-SHA256 of `${id}.${timestamp}.${body}`>
 *
 * keyed with the receiver's endpoint secret (`whsec_…`). That secret is not
 * HTTP_SIGNING_SECRET itself but derived from it, the job's tenant and the
 * URL's origin and path (`httpEndpointSecret`), so what is signed is bound to
 * where it goes and for whom: a request captured at one endpoint and replayed
 * to another (another URL, or the same URL for another tenant) fails
 * verification there, since that endpoint holds another secret; replayed
 * later than the verifier's window, it fails on its timestamp; and any
 * change to the body or the job id fails the HMAC. The query string is not
 * bound: an endpoint is its origin and path.
 */
export const WEBHOOK_HEADERS = ['webhook-id', 'webhook-timestamp', 'webhook-signature'] as const;

const SECRET_PREFIX = 'whsec_';
const encoder = new TextEncoder();

async function hmacSha256(key: Uint8Array, message: string): Promise<Uint8Array> {
  const imported = await crypto.subtle.importKey('raw', key, { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
  return new Uint8Array(await crypto.subtle.sign('HMAC', imported, encoder.encode(message)));
}

function base64(bytes: Uint8Array): string {
  let binary = '';
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary);
}

/** The endpoint's signing key: HMAC-SHA256 under a signing secret (HTTP_SIGNING_SECRET, a DELIVERY_SECRET_…) of the tenant, origin and path. */
export async function endpointKey(signingSecret: string, tenant: string, url: URL): Promise<Uint8Array> {
  // Line breaks cannot occur in an origin or a path, so the parts cannot run into each other.
  const endpoint = `skiplock http endpoint v1\n${tenant}\n${url.origin}${url.pathname}`;
  return hmacSha256(encoder.encode(signingSecret), endpoint);
}

/**
 * The `whsec_…` secret that a receiver at `url` verifies the deliveries of
 * `tenant`'s `http` jobs with: give it to the receiver's Standard Webhooks
 * verifier. Computed from HTTP_SIGNING_SECRET, so only whoever holds that
 * secret can hand endpoint secrets out.
 */
export async function httpEndpointSecret(
  signingSecret: string,
  endpoint: { tenant: string; url: string | URL },
): Promise<string> {
  return SECRET_PREFIX + base64(await endpointKey(signingSecret, endpoint.tenant, new URL(endpoint.url)));
}

export type WebhookHeaders = Record<(typeof WEBHOOK_HEADERS)[number], string>;

/** The Standard Webhooks headers that sign one delivery of a job of `tenant` to `url`. */
export async function webhookHeaders(
  signingSecret: string,
  delivery: { jobId: string; tenant: string; url: URL; body: string; unixSeconds: number },
): Promise<WebhookHeaders> {
  const key = await endpointKey(signingSecret, delivery.tenant, delivery.url);
  return signedHeaders(key, { id: delivery.jobId, unixSeconds: delivery.unixSeconds, body: delivery.body });
}

/** The Standard Webhooks headers of one message, signed with the endpoint's key. */
export async function signedHeaders(
  key: Uint8Array,
  message: { id: string; unixSeconds: number; body: string },
): Promise<WebhookHeaders> {
  const signature = await hmacSha256(key, `${message.id}.${message.unixSeconds}.${message.body}`);
  return {
    'webhook-id': message.id,
    'webhook-timestamp': String(message.unixSeconds),
    'webhook-signature': `v1,${base64(signature)}`,
  };
}

/** The key of an endpoint secret as Standard Webhooks gives it out (`whsec_` and base64). */
export function endpointSecretKey(secret: string): Uint8Array {
  const encoded = secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : '';
  let bytes: Uint8Array | undefined;
  try {
    bytes = Uint8Array.from(atob(encoded), (char) => char.charCodeAt(0));
  } catch {
    bytes = undefined;
  }
  if (bytes === undefined || bytes.length < 24) {
    throw new RangeError('a webhook secret is "whsec_" and the base64 of at least 24 random bytes');
  }
  return bytes;
}

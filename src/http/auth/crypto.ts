/** The Web Crypto pieces the auth code shares; Web Crypto runs the same in workerd and Node. */

const encoder = new TextEncoder();

export function base64url(bytes: Uint8Array): string {
  let binary = '';
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary).replaceAll('+', '-').replaceAll('/', '_').replace(/=+$/, '');
}

/** Undefined for text that is not base64url. */
export function fromBase64url(text: string): Uint8Array | undefined {
  if (!/^[A-Za-z0-9_-]*$/.test(text)) return undefined;
  const binary = atob(text.replaceAll('-', '+').replaceAll('_', '/'));
  return Uint8Array.from(binary, (char) => char.charCodeAt(0));
}

export function randomBytes(length: number): Uint8Array {
  return crypto.getRandomValues(new Uint8Array(length));
}

export async function sha256(text: string): Promise<Uint8Array> {
  return new Uint8Array(await crypto.subtle.digest('SHA-256', encoder.encode(text)));
}

export async function sha256Hex(text: string): Promise<string> {
  return Array.from(await sha256(text), (byte) => byte.toString(16).padStart(2, '0')).join('');
}

/**
 * Compares two secrets in constant time: it compares their SHA-256 digests
 * (32 bytes whatever the secrets' lengths) without an early exit.
 */
export async function sameSecret(presented: string, expected: string): Promise<boolean> {
  const [a, b] = await Promise.all([sha256(presented), expectedDigest(expected)]);
  let difference = 0;
  for (let i = 0; i < a.length; i++) difference |= a[i]! ^ b[i]!;
  return difference === 0;
}

/**
 * What is derived from a secret (an imported key, a digest), kept for the
 * isolate's life: deriving costs more than the use every request makes of
 * it, and the secret is in memory anyway. A Worker has a secret or two; a
 * rotation adds one, and the map is emptied should it ever hold more than a few.
 */
export function keptPerSecret<T>(derive: (secret: string) => Promise<T>): (secret: string) => Promise<T> {
  const kept = new Map<string, Promise<T>>();
  return (secret) => {
    let value = kept.get(secret);
    if (value === undefined) {
      if (kept.size >= MAX_KEPT_SECRETS) kept.clear();
      value = derive(secret);
      // A failure is not kept: the next call tries again.
      value.catch(() => kept.delete(secret));
      kept.set(secret, value);
    }
    return value;
  };
}

const MAX_KEPT_SECRETS = 8;

/** The digest of the secret `sameSecret` compares with (the ADMIN_TOKEN, at every request that presents it). */
const expectedDigest = keptPerSecret(sha256);

const hmacKey = (usage: 'sign' | 'verify') =>
  keptPerSecret((secret) =>
    crypto.subtle.importKey('raw', encoder.encode(secret), { name: 'HMAC', hash: 'SHA-256' }, false, [usage]),
  );
const signingKey = hmacKey('sign');
const verifyingKey = hmacKey('verify');

/** Signs many messages with one imported key (a batch enqueue signs up to 1,000 status tokens). */
export async function hmacSha256Signer(secret: string): Promise<(message: string) => Promise<Uint8Array>> {
  const key = await signingKey(secret);
  return async (message) => new Uint8Array(await crypto.subtle.sign('HMAC', key, encoder.encode(message)));
}

/** Web Crypto's verify compares the signature in constant time. */
export async function hmacSha256Matches(secret: string, message: string, signature: Uint8Array): Promise<boolean> {
  return crypto.subtle.verify('HMAC', await verifyingKey(secret), signature, encoder.encode(message));
}

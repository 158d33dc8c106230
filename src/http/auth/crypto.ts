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
  const [a, b] = await Promise.all([sha256(presented), sha256(expected)]);
  let difference = 0;
  for (let i = 0; i < a.length; i++) difference |= a[i]! ^ b[i]!;
  return difference === 0;
}

/**
 * Imported keys by usage and secret, kept for the isolate's life: importing
 * one costs more than the signature it makes, and every enqueue signs. A
 * Worker has a secret or two; a rotation adds one, and the map is emptied
 * should it ever hold more than a few.
 */
const importedKeys = new Map<string, Promise<CryptoKey>>();
const MAX_IMPORTED_KEYS = 8;

function hmacKey(secret: string, usage: 'sign' | 'verify'): Promise<CryptoKey> {
  const id = `${usage}:${secret}`;
  let key = importedKeys.get(id);
  if (key === undefined) {
    if (importedKeys.size >= MAX_IMPORTED_KEYS) importedKeys.clear();
    key = crypto.subtle.importKey('raw', encoder.encode(secret), { name: 'HMAC', hash: 'SHA-256' }, false, [usage]);
    // A failed import is not kept: the next call tries again.
    key.catch(() => importedKeys.delete(id));
    importedKeys.set(id, key);
  }
  return key;
}

/** Signs many messages with one imported key (a batch enqueue signs up to 1,000 status tokens). */
export async function hmacSha256Signer(secret: string): Promise<(message: string) => Promise<Uint8Array>> {
  const key = await hmacKey(secret, 'sign');
  return async (message) => new Uint8Array(await crypto.subtle.sign('HMAC', key, encoder.encode(message)));
}

/** Web Crypto's verify compares the signature in constant time. */
export async function hmacSha256Matches(secret: string, message: string, signature: Uint8Array): Promise<boolean> {
  return crypto.subtle.verify('HMAC', await hmacKey(secret, 'verify'), signature, encoder.encode(message));
}

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

function hmacKey(secret: string, usage: 'sign' | 'verify'): Promise<CryptoKey> {
  return crypto.subtle.importKey('raw', encoder.encode(secret), { name: 'HMAC', hash: 'SHA-256' }, false, [usage]);
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

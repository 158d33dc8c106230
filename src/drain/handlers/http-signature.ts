/**
 * Signatures of `http` job deliveries, so a receiver can tell skiplock's
 * requests from anyone else's: header `skiplock-signature: t=<unix>,v1=<hex>`,
 * the HMAC-SHA256 of `${t}.${body}` under the shared secret. The timestamp
 * lets the receiver refuse replays of old requests.
 */
export const SIGNATURE_HEADER = 'skiplock-signature';

const encoder = new TextEncoder();

function hmacKey(secret: string, usage: 'sign' | 'verify'): Promise<CryptoKey> {
  return crypto.subtle.importKey('raw', encoder.encode(secret), { name: 'HMAC', hash: 'SHA-256' }, false, [usage]);
}

export async function signatureHeader(secret: string, body: string, unixSeconds: number): Promise<string> {
  const mac = await crypto.subtle.sign('HMAC', await hmacKey(secret, 'sign'), encoder.encode(`${unixSeconds}.${body}`));
  const hex = [...new Uint8Array(mac)].map((byte) => byte.toString(16).padStart(2, '0')).join('');
  return `t=${unixSeconds},v1=${hex}`;
}

/**
 * For receivers written in TypeScript: true when `header` signs `body` with
 * `secret` and is at most `toleranceSeconds` old. Compares in constant time
 * (WebCrypto's verify).
 */
export async function verifySignature(
  header: string,
  body: string,
  secret: string,
  options: { toleranceSeconds?: number; nowSeconds?: number } = {},
): Promise<boolean> {
  const match = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(header);
  if (match === null) return false;
  const t = match[1]!;
  const hex = match[2]!;
  const age = (options.nowSeconds ?? Math.floor(Date.now() / 1000)) - Number(t);
  if (Math.abs(age) > (options.toleranceSeconds ?? 300)) return false;
  const mac = new Uint8Array(hex.match(/../g)!.map((pair) => parseInt(pair, 16)));
  return crypto.subtle.verify('HMAC', await hmacKey(secret, 'verify'), mac, encoder.encode(`${t}.${body}`));
}

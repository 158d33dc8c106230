import { base64url, randomBytes } from './crypto.js';

/**
 * Every key secret starts with this, so a leaked one is recognizable (secret
 * scanners, log filters). Not `sk_live_`: scanners already read that as Stripe's.
 */
export const API_KEY_PREFIX = 'skiplock_';

/** 256 random bits. */
const SECRET_BYTES = 32;
const API_KEY_SHAPE = /^skiplock_[A-Za-z0-9_-]{43}$/;

/** How much of a secret is kept in the clear, to tell keys apart in a list. */
const SHOWN_CHARACTERS = API_KEY_PREFIX.length + 4;

export function newApiKeySecret(): string {
  return API_KEY_PREFIX + base64url(randomBytes(SECRET_BYTES));
}

/** Only a token of this shape can be a key, so other bearer tokens never cost a database lookup. */
export function looksLikeApiKey(token: string): boolean {
  return API_KEY_SHAPE.test(token);
}

export function shownPrefixOf(secret: string): string {
  return secret.slice(0, SHOWN_CHARACTERS);
}

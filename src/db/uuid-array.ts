/** Postgres's type oid for uuid, which a binary array names for its elements. */
const UUID_OID = 2950;

/** Hex digit values by character code, -1 for anything else. */
const HEX_DIGITS = new Int8Array(128).fill(-1);
for (let digit = 0; digit < 16; digit++) {
  HEX_DIGITS['0123456789abcdef'.charCodeAt(digit)] = digit;
  HEX_DIGITS['0123456789ABCDEF'.charCodeAt(digit)] = digit;
}

/**
 * A `uuid[]` statement parameter, for statements that take many uuids
 * (a batch completion's ids and lease tokens). Postgres reads a uuid written
 * as text one digit pair at a time; in binary it copies 16 bytes. Drivers
 * that speak Postgres's wire protocol send `binary()`; any other client reads
 * it the node-postgres way (`toPostgres`) and gets a plain array, so the
 * value is safe to hand to a caller's own client too.
 */
export class UuidArray {
  constructor(readonly uuids: readonly string[]) {}

  /** The value as node-postgres, Neon's drivers and their ports prepare it: an array of strings. */
  toPostgres(): string[] {
    return [...this.uuids];
  }

  /**
   * The array in Postgres's binary format (as array_recv reads it), or
   * undefined when an element is not a uuid in its usual form: then the
   * text form goes, and Postgres reports a malformed value as it would.
   */
  binary(): Uint8Array | undefined {
    const { uuids } = this;
    const bytes = new Uint8Array(20 + 20 * uuids.length);
    const view = new DataView(bytes.buffer);
    // Dimensions (none for an empty array), no nulls, the element type; then the one dimension's length and lower bound.
    view.setInt32(0, uuids.length === 0 ? 0 : 1);
    view.setInt32(4, 0);
    view.setInt32(8, UUID_OID);
    if (uuids.length === 0) return bytes.subarray(0, 12);
    view.setInt32(12, uuids.length);
    view.setInt32(16, 1);
    let offset = 20;
    for (const uuid of uuids) {
      view.setInt32(offset, 16);
      if (!writeUuid(bytes, offset + 4, uuid)) return undefined;
      offset += 20;
    }
    return bytes;
  }
}

/** Writes `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` as its 16 bytes; false when it is not that. */
function writeUuid(bytes: Uint8Array, offset: number, uuid: string): boolean {
  if (uuid.length !== 36) return false;
  let at = offset;
  for (let i = 0; i < 36; i += 2) {
    // The hyphens stand at 8, 13, 18 and 23, between whole bytes.
    if (i === 8 || i === 13 || i === 18 || i === 23) {
      if (uuid.charCodeAt(i) !== 45) return false;
      i -= 1;
      continue;
    }
    const high = HEX_DIGITS[uuid.charCodeAt(i)] ?? -1;
    const low = HEX_DIGITS[uuid.charCodeAt(i + 1)] ?? -1;
    if (high < 0 || low < 0) return false;
    bytes[at++] = (high << 4) | low;
  }
  return true;
}

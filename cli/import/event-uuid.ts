// Deterministic event uuids for records that carry none. Capture would give such an event a
// random uuid, so a batch sent again after a crash (sent, maybe stored, not yet acknowledged)
// would become new events. Derived from the file's identity and the record's position, the
// uuid is the same on every run, so a repeat is the same event and workers drop it by uuid.
//
// Layout (RFC 9562 version 8, "custom"): 74 bits of the file identity (a SHA-256 hex digest) and
// the position in the low 48 bits (files of up to 2^48 lines).
//   iiiiiiii-iiii-8iii-Viii-pppppppppppp   (V = variant 10xx carrying 2 more identity bits)

const POSITION_LIMIT = 2 ** 48;

export type EventUuid = (position: number) => string;

export function eventUuidFactory(identityHex: string): EventUuid {
  if (!/^[0-9a-f]{19,}$/.test(identityHex)) throw new Error('file identity must be a lowercase hex digest');
  const variant = ((parseInt(identityHex[15]!, 16) & 0x3) | 0x8).toString(16);
  const prefix = `${identityHex.slice(0, 8)}-${identityHex.slice(8, 12)}-8${identityHex.slice(12, 15)}-${variant}${identityHex.slice(16, 19)}-`;
  return (position) => {
    if (!Number.isInteger(position) || position < 0 || position >= POSITION_LIMIT) throw new RangeError(`position out of range: ${position}`);
    return prefix + position.toString(16).padStart(12, '0');
  };
}

/** The position encoded in a uuid made by eventUuidFactory (for tests and diagnostics). */
export function positionOfEventUuid(uuid: string): number {
  return parseInt(uuid.slice(24), 16);
}

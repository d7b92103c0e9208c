// The size cap on person and group properties (WORKER_MAX_PROPERTIES_BYTES), in bytes of their
// JSON text. Measuring a person's whole properties on every update would cost a serialisation per
// event: each person's size is measured once per batch, each update adds at most the size of what
// it sets, and only when that bound passes the cap are the new properties measured exactly.
import type { Properties } from '../../lib/index.js';

/** Bytes of a value as JSON text (a value too deep to serialise throws RangeError: a poison event). */
export function jsonBytes(value: unknown): number {
  return Buffer.byteLength(JSON.stringify(value) ?? '', 'utf8');
}

/**
 * Bytes `entries` can add to an object's JSON at most: `"key":value,` each. Strings and scalars
 * are bounded without serialising them (a UTF-16 unit takes at most 6 bytes of JSON: `\u001f`).
 */
function entriesBytes(entries: Properties | undefined): number {
  if (!entries) return 0;
  let bytes = 0;
  for (const key in entries) {
    const value = entries[key];
    bytes += key.length * 6 + 4;
    if (typeof value === 'string') bytes += value.length * 6 + 2;
    else if (value === null || typeof value === 'number' || typeof value === 'boolean') bytes += 24;
    else bytes += jsonBytes(value);
  }
  return bytes;
}

export class PropertiesBudget {
  /** Per person or group id: an upper bound of its properties' JSON bytes in this batch. */
  private readonly bound = new Map<string, number>();

  constructor(readonly maxBytes: number) {}

  /**
   * Whether `next` may replace `current` for `id`, given the entries the update wrote (`set`s and
   * `set_once`s; removals only shrink): within the cap, or no larger than before. Returns the
   * exact size when it had to be measured and refuses.
   */
  admits(id: string, current: Properties, next: Properties, written: readonly (Properties | undefined)[]): { ok: true } | { ok: false; bytes: number } {
    let bound = this.bound.get(id) ?? jsonBytes(current);
    for (const entries of written) bound += entriesBytes(entries);
    if (bound > this.maxBytes) {
      const exact = jsonBytes(next);
      if (exact > this.maxBytes) {
        const now = jsonBytes(current);
        if (exact > now) {
          this.bound.set(id, now);
          return { ok: false, bytes: exact };
        }
      }
      bound = exact;
    }
    this.bound.set(id, bound);
    return { ok: true };
  }

  /** `id`'s properties changed some other way (a merge): measure them again when next asked. */
  forget(id: string): void {
    this.bound.delete(id);
  }
}

// How large an lz-string (lz64) payload is once decompressed, found without decompressing it.
// lz-string's decompressFromBase64 builds its whole output before returning, and its format is
// LZW-like: each code may repeat a longer dictionary entry than the last, so a few KB of input
// can stand for gigabytes (a "bomb"). Walking the codes while keeping only each dictionary
// entry's size (not its text) costs a few bytes per code and stops as soon as the total passes
// the limit; only a payload that fits is then decompressed by the library.

/** Value of each base64 character as lz-string reads it; anything else reads as 0, as there. */
const CHAR_VALUES = new Uint8Array(256);
const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=';
for (let i = 0; i < ALPHABET.length; i++) CHAR_VALUES[ALPHABET.charCodeAt(i)] = i;

/** Bits per base64 character; lz-string reads each character's bits from the highest down. */
const HIGH_BIT = 32;

export type LzStringSize =
  /** UTF-8 bytes of the output, counting an unpaired surrogate as 2 (encoded it takes 3). */
  | { kind: 'ok'; bytes: number }
  /** Over the limit: decoding stopped there. */
  | { kind: 'over_limit' }
  /** Not an lz-string stream (lz-string would return null or an empty string). */
  | { kind: 'invalid' };

/** UTF-8 bytes of one UTF-16 unit; a surrogate counts 2 so that a pair counts its 4. */
function unitBytes(unit: number): number {
  if (unit < 0x80) return 1;
  if (unit < 0x800 || (unit >= 0xd800 && unit <= 0xdfff)) return 2;
  return 3;
}

/** Sizes of dictionary entries, by index: their UTF-8 bytes and those of their first unit. */
class EntrySizes {
  bytes = new Float64Array(1024);
  first = new Uint8Array(1024);

  set(index: number, bytes: number, first: number): void {
    if (index >= this.bytes.length) {
      const bytesGrown = new Float64Array(this.bytes.length * 2);
      bytesGrown.set(this.bytes);
      this.bytes = bytesGrown;
      const firstGrown = new Uint8Array(this.first.length * 2);
      firstGrown.set(this.first);
      this.first = firstGrown;
    }
    this.bytes[index] = bytes;
    this.first[index] = first;
  }
}

/** Decoded size of `input` (the base64 text `decompressFromBase64` takes), up to `limitBytes`. */
export function lzStringBase64Size(input: string, limitBytes: number): LzStringSize {
  const length = input.length;
  if (length === 0) return { kind: 'invalid' };
  // Past the end lz-string reads nothing (0 bits), and stops at the next code.
  const valueAt = (i: number): number => (i < length ? (CHAR_VALUES[input.charCodeAt(i)] ?? 0) : 0);
  let value = valueAt(0);
  let position = HIGH_BIT;
  let index = 1; // characters loaded so far
  const read = (count: number): number => {
    let bits = 0;
    for (let k = 0; k < count; k++) {
      if ((value & position) !== 0) bits += 2 ** k;
      position >>= 1;
      if (position === 0) {
        position = HIGH_BIT;
        value = valueAt(index++);
      }
    }
    return bits;
  };

  // Entries 0–2 are codes (8-bit literal, 16-bit literal, end), not text.
  const sizes = new EntrySizes();
  const first = read(2);
  if (first === 2 || first > 2) return { kind: 'invalid' };
  const firstUnit = unitBytes(read(first === 0 ? 8 : 16));
  sizes.set(3, firstUnit, firstUnit);
  let dictSize = 4;
  let enlargeIn = 4;
  let numBits = 3;
  let previous = 3; // the entry emitted last
  let total = firstUnit;
  if (total > limitBytes) return { kind: 'over_limit' };

  for (;;) {
    if (index > length) return { kind: 'invalid' }; // ran out before the end code
    let code = read(numBits);
    if (code === 2) return { kind: 'ok', bytes: total };
    if (code < 2) {
      const unit = unitBytes(read(code === 0 ? 8 : 16));
      sizes.set(dictSize, unit, unit);
      code = dictSize++;
      if (--enlargeIn === 0) enlargeIn = 2 ** numBits++;
    }
    let entryBytes: number;
    let entryFirst: number;
    if (code < dictSize) {
      entryBytes = sizes.bytes[code]!;
      entryFirst = sizes.first[code]!;
    } else if (code === dictSize) {
      // The entry being defined by this very code: the previous one plus its own first unit.
      entryBytes = sizes.bytes[previous]! + sizes.first[previous]!;
      entryFirst = sizes.first[previous]!;
    } else {
      return { kind: 'invalid' };
    }
    total += entryBytes;
    if (total > limitBytes) return { kind: 'over_limit' };
    sizes.set(dictSize++, sizes.bytes[previous]! + entryFirst, sizes.first[previous]!);
    previous = code;
    if (--enlargeIn === 0) enlargeIn = 2 ** numBits++;
  }
}

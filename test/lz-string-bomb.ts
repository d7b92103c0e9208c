// An lz-string (lz64) "bomb" for tests: a few KB of base64 that decompress to one character
// repeated n(n+3)/2 + 1 times. After a literal, code k repeats the entry being defined (the
// previous entry plus its first character), so each code adds one character more than the last.

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=';

/** Base64 text `LZString.decompressFromBase64` turns into `char` repeated lzBombLength(codes) times. */
export function lzStringBomb(char: string, codes: number): string {
  const unit = char.charCodeAt(0);
  let out = '';
  let current = 0;
  let filled = 0; // bits of `current` used, highest first
  const write = (value: number, count: number) => {
    for (let k = 0; k < count; k++) {
      current = (current << 1) | (Math.floor(value / 2 ** k) & 1);
      if (++filled === 6) {
        out += ALPHABET[current]!;
        current = 0;
        filled = 0;
      }
    }
  };
  write(unit < 256 ? 0 : 1, 2);
  write(unit, unit < 256 ? 8 : 16);
  let dictSize = 4;
  let enlargeIn = 4;
  let numBits = 3;
  for (let i = 0; i < codes; i++) {
    write(dictSize++, numBits);
    if (--enlargeIn === 0) enlargeIn = 2 ** numBits++;
  }
  write(2, numBits); // end of stream
  if (filled > 0) write(0, 6 - filled);
  return out.padEnd(Math.ceil(out.length / 4) * 4, '=');
}

/** Characters `lzStringBomb(char, codes)` decompresses to. */
export function lzBombLength(codes: number): number {
  return 1 + (codes * (codes + 3)) / 2;
}

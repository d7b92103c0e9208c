// How deeply a payload's JSON nests, found without parsing it. JSON.parse in V8 takes any depth,
// but JSON.stringify and the workers after it recurse and fail at a few thousand levels: an
// event nested that deep would fail its batch every time it is processed. Capture refuses
// payloads nested deeper than MAX_NESTING_DEPTH (PostHog's parser stops at 128) before parsing.
import { CaptureError } from '../errors.js';

/** PostHog's capture parser (serde_json) stops at 128 levels: the default of MAX_NESTING_DEPTH. */
export const DEFAULT_MAX_NESTING_DEPTH = 128;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_OBJECT = 0x7b;
const OPEN_ARRAY = 0x5b;
const CLOSE_OBJECT = 0x7d;
const CLOSE_ARRAY = 0x5d;

export function tooDeep(limit: number): CaptureError {
  return new CaptureError('invalid_event', `failed to parse request: JSON nested deeper than ${limit} levels (the limit)`, { attr: 'properties' });
}

/** Strings shorter than this (most keys and values) are walked here: a native indexOf call costs more. */
const SHORT_STRING = 32;

/** Just past the closing quote of the string opening at `i`; -1 if it never closes. */
export function skipString(b: Uint8Array, i: number): number {
  const near = Math.min(b.length, i + SHORT_STRING);
  let from = i + 1;
  while (from < near) {
    const c = b[from];
    if (c === QUOTE) return from + 1;
    from += c === BACKSLASH ? 2 : 1; // an escaped character is never the closing quote
  }
  for (;;) {
    const q = b.indexOf(QUOTE, from); // native memchr: most of a payload is inside strings
    if (q === -1) return -1;
    let slashes = 0;
    for (let k = q - 1; b[k] === BACKSLASH; k--) slashes++;
    if (slashes % 2 === 0) return q + 1;
    from = q + 1;
  }
}

/**
 * At most `limit` opening brackets anywhere (in strings too): then no value can nest deeper.
 * Counted with native indexOf, so the common payload (a few objects per event) costs a handful
 * of calls, and only payloads with many brackets are walked byte by byte.
 */
function fewBrackets(b: Uint8Array, limit: number): boolean {
  let n = 0;
  for (const c of [OPEN_OBJECT, OPEN_ARRAY]) {
    for (let i = b.indexOf(c); i !== -1; i = b.indexOf(c, i + 1)) if (++n > limit) return false;
  }
  return true;
}

/** True when some value of the JSON text `b` nests deeper than `limit` (the root is level 1). */
export function nestsDeeperThan(payload: Uint8Array | string, limit: number): boolean {
  const b = typeof payload === 'string' ? Buffer.from(payload, 'utf8') : payload;
  if (fewBrackets(b, limit)) return false;
  let depth = 0;
  for (let i = 0; i < b.length; i++) {
    const c = b[i];
    if (c === QUOTE) {
      const end = skipString(b, i);
      if (end === -1) return false; // unterminated: not JSON, and JSON.parse says so
      i = end - 1;
    } else if (c === OPEN_OBJECT || c === OPEN_ARRAY) {
      if (++depth > limit) return true;
    } else if (c === CLOSE_OBJECT || c === CLOSE_ARRAY) {
      depth--;
    }
  }
  return false;
}

// Used for payloads from SCAN_MIN_BYTES (read-envelope.ts) on: below it one JSON.parse is cheaper.
//
// Finds the top-level structure of a capture payload — the envelope's fields and the byte
// range of each event — without building the whole object graph. JSON.parse of a 20 MB batch
// holds ~250 MB of objects at once; parsing event by event keeps a parse thread's memory near
// the size of the body and lets short-lived objects die young.
//
// It validates only the envelope's punctuation. Every event's bytes still go through JSON.parse
// (which rejects anything malformed inside them), and whenever the envelope looks unusual the
// scanner gives up and the caller parses the whole payload with JSON.parse, which then either
// succeeds or reports the syntax error. So it can make parsing cheaper, never more lenient.
//
// It also enforces the nesting limit (nesting-depth.ts) while it walks each value's brackets,
// so a large payload is not walked twice for it.
import { CaptureError } from '../errors.js';
import { DEFAULT_MAX_NESTING_DEPTH, skipString, tooDeep } from './nesting-depth.js';

/** Default of MAX_EVENTS_PER_REQUEST (see config.ts for why). */
export const DEFAULT_MAX_EVENTS = 100_000;

export function tooManyEvents(limit: number): CaptureError {
  return new CaptureError('too_many_events', `a request may carry at most ${limit} events (MAX_EVENTS_PER_REQUEST)`);
}

const QUOTE = 0x22;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const COMMA = 0x2c;
const COLON = 0x3a;

export interface ScannedPayload {
  /** `array`: a JSON array of events; `batch`: an object with a `batch` array. */
  shape: 'array' | 'batch';
  /** The object's other top-level fields, parsed (batch shape). */
  fields: Record<string, unknown>;
  /** [start, end) byte offsets of each event in the payload. */
  events: Int32Array;
  /** The payload. */
  bytes: Buffer;
}

function isSpace(c: number | undefined): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}

function skipSpace(b: Uint8Array, i: number): number {
  while (i < b.length && isSpace(b[i])) i++;
  return i;
}

/**
 * Just past the value starting at `i`; -1 when its brackets or strings do not close. Throws
 * invalid_event when it nests deeper than `maxDepth` levels below the value's parent.
 */
function skipValue(b: Uint8Array, i: number, maxDepth: number, limit: number): number {
  const c = b[i];
  if (c === QUOTE) return skipString(b, i);
  if (c === OPEN_OBJECT || c === OPEN_ARRAY) {
    let depth = 0;
    for (let j = i; j < b.length; j++) {
      const x = b[j];
      if (x === QUOTE) {
        j = skipString(b, j);
        if (j === -1) return -1;
        j--; // the loop's j++ lands just past the string
      } else if (x === OPEN_OBJECT || x === OPEN_ARRAY) {
        if (++depth > maxDepth) throw tooDeep(limit);
      } else if (x === CLOSE_OBJECT || x === CLOSE_ARRAY) {
        if (--depth === 0) return j + 1;
      }
    }
    return -1;
  }
  let j = i;
  for (; j < b.length; j++) {
    const x = b[j];
    if (x === COMMA || x === CLOSE_OBJECT || x === CLOSE_ARRAY || isSpace(x)) break;
  }
  return j > i ? j : -1;
}

/** The elements of the array opening at `i`: their ranges, and the index just past `]`. */
function scanArray(b: Uint8Array, i: number, maxDepth: number, limit: number, maxEvents = Number.POSITIVE_INFINITY): { ranges: number[]; end: number } | undefined {
  const ranges: number[] = [];
  let j = skipSpace(b, i + 1);
  if (b[j] === CLOSE_ARRAY) return { ranges, end: j + 1 };
  for (;;) {
    const end = skipValue(b, j, maxDepth, limit);
    if (end === -1) return undefined;
    // Stop here rather than index a million tiny events only to refuse them.
    if (ranges.length >= 2 * maxEvents) throw tooManyEvents(maxEvents);
    ranges.push(j, end);
    j = skipSpace(b, end);
    const next = b[j];
    if (next === COMMA) j = skipSpace(b, j + 1);
    else if (next === CLOSE_ARRAY) return { ranges, end: j + 1 };
    else return undefined;
  }
}

/** `b` as a Buffer (a view, made once per payload: decoding a span through it makes no new object). */
function asBuffer(b: Uint8Array): Buffer {
  return Buffer.isBuffer(b) ? b : Buffer.from(b.buffer, b.byteOffset, b.length);
}

function parseSpan(b: Buffer, start: number, end: number): unknown {
  return JSON.parse(b.toString('utf8', start, end));
}

/**
 * The envelope of a payload in the array or `{…, "batch": […]}` shape; undefined for any other
 * shape (a single event) or anything unusual — the caller then uses JSON.parse on the whole.
 * Throws invalid_event when a value nests deeper than `limit` levels (the root is level 1).
 */
export function scanPayload(payload: Uint8Array, limit = DEFAULT_MAX_NESTING_DEPTH, maxEvents = DEFAULT_MAX_EVENTS): ScannedPayload | undefined {
  const b = asBuffer(payload);
  let i = skipSpace(b, 0);
  let shape: ScannedPayload['shape'];
  let ranges: number[] | undefined;
  const fields: Record<string, unknown> = {};
  const first = b[i];
  if (first === OPEN_ARRAY) {
    const array = scanArray(b, i, limit - 1, limit, maxEvents);
    if (!array) return undefined;
    shape = 'array';
    ranges = array.ranges;
    i = array.end;
  } else if (first === OPEN_OBJECT) {
    shape = 'batch';
    i = skipSpace(b, i + 1);
    if (b[i] === CLOSE_OBJECT) return undefined;
    for (;;) {
      if (b[i] !== QUOTE) return undefined;
      const keyEnd = skipString(b, i);
      if (keyEnd === -1) return undefined;
      let key: string;
      try {
        key = parseSpan(b, i, keyEnd) as string;
      } catch {
        return undefined;
      }
      i = skipSpace(b, keyEnd);
      if (b[i] !== COLON) return undefined;
      i = skipSpace(b, i + 1);
      // A repeated key means "the last one wins" in JSON.parse: leave such oddities to it.
      if (key === 'batch' && b[i] === OPEN_ARRAY && ranges === undefined && !('batch' in fields)) {
        const array = scanArray(b, i, limit - 2, limit, maxEvents);
        if (!array) return undefined;
        ranges = array.ranges;
        i = array.end;
      } else {
        const end = skipValue(b, i, limit - 1, limit);
        if (end === -1 || key in fields || (key === 'batch' && ranges !== undefined)) return undefined;
        try {
          fields[key] = parseSpan(b, i, end);
        } catch {
          return undefined;
        }
        i = end;
      }
      i = skipSpace(b, i);
      const next = b[i];
      if (next === COMMA) i = skipSpace(b, i + 1);
      else if (next === CLOSE_OBJECT) {
        i++;
        break;
      } else return undefined;
    }
    if (ranges === undefined) return undefined; // no batch array: a single event (or a bad batch)
  } else {
    return undefined;
  }
  if (skipSpace(b, i) !== b.length) return undefined;
  return { shape, fields, events: Int32Array.from(ranges), bytes: b };
}

/** Parses the event at `index` of a scanned payload (throws SyntaxError like JSON.parse). */
export function parseScannedEvent(scanned: ScannedPayload, index: number): unknown {
  return parseSpan(scanned.bytes, scanned.events[2 * index]!, scanned.events[2 * index + 1]!);
}

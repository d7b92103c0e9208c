// Body decoding as the PostHog SDKs encode it (reference/posthog-capture.md §2): query `data=`
// or the body; form-urlencoded `data=`; optimistic base64; gzip by hint or magic bytes;
// lz-string (lz64). Pure: bytes in, JSON text out, or a CaptureError.
import { gunzipSync } from 'node:zlib';
import LZString from 'lz-string';
import { CaptureError } from '../errors.js';
import { lzStringBase64Size } from './lz-string-size.js';

export interface DecodeInput {
  body: Uint8Array;
  query: URLSearchParams;
  contentType: string;
  contentEncoding: string;
  /** `/e`, `/capture`, `/engage`, `/track`: a result that still looks like base64 is decoded again. */
  legacyPath: boolean;
  maxDecompressedBytes: number;
  /**
   * Takes bytes from the node's in-flight budget before they are allocated (decoded output);
   * false: the node is at its budget (503 overloaded). Absent: nothing is counted.
   */
  reserve?: (bytes: number) => boolean;
  /** Gives back bytes taken with `reserve` that turned out not to be needed. */
  unreserve?: (bytes: number) => void;
}

type Compression = 'gzip' | 'lz64' | 'base64' | undefined;

const FORM_TYPE = 'application/x-www-form-urlencoded';
const SNIFF = 128;

function compressionOf(hint: string | null | undefined): Compression {
  switch ((hint ?? '').trim().toLowerCase()) {
    case 'gzip':
    case 'gzip-js':
      return 'gzip';
    case 'lz64':
    case 'lz-string':
      return 'lz64';
    case 'base64':
    case 'b64':
      return 'base64';
    default:
      return undefined;
  }
}

function asciiPrefix(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, Math.min(bytes.length, SNIFF)).toString('latin1');
}

const FORM_KEYS = ['data=', '_=', 'ip=', 'compression='];

export function looksLikeForm(bytes: Uint8Array): boolean {
  const head = asciiPrefix(bytes);
  return FORM_KEYS.some((k) => head.startsWith(k) || head.includes(`&${k}`));
}

const BASE64_CHARS = /^[A-Za-z0-9+/=]*$/;

export function looksLikeBase64(bytes: Uint8Array): boolean {
  return bytes.length > 0 && bytes.length % 4 === 0 && BASE64_CHARS.test(asciiPrefix(bytes));
}

function isGzip(bytes: Uint8Array): boolean {
  return bytes.length >= 2 && bytes[0] === 0x1f && bytes[1] === 0x8b;
}

function fromBase64(bytes: Uint8Array): Buffer {
  return Buffer.from(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length).toString('latin1'), 'base64');
}

/** Form fields carry base64 with `+` turned into spaces by URL decoding; turn them back. */
function formValueBytes(value: string): Buffer {
  const restored = Buffer.from(value.replace(/ /g, '+'), 'latin1');
  return looksLikeBase64(restored) ? restored : Buffer.from(value, 'utf8');
}

const overloaded = () => new CaptureError('overloaded', 'ingest node is at capacity (decoded payload), please retry');

const tooLarge = (limit: number, options?: ErrorOptions) =>
  new CaptureError('payload_too_large', `decompressed payload exceeds ${limit} bytes`, {}, options);

/**
 * lz-string builds its whole output before returning, and a few KB of it can stand for
 * gigabytes: its size is measured first (without building it), and only a payload within the
 * limit is decompressed. The limit counts UTF-8 bytes, as for gzip, not UTF-16 units.
 */
function lzString(bytes: Uint8Array, limit: number, reserve: (bytes: number) => boolean): string {
  const raw = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length).toString('latin1');
  const size = lzStringBase64Size(raw, limit);
  if (size.kind === 'over_limit') throw tooLarge(limit);
  // lz-string builds a JS string (2 bytes per unit, and as many again while it grows).
  if (size.kind === 'ok' && !reserve(2 * size.bytes)) throw overloaded();
  const out = size.kind === 'ok' ? LZString.decompressFromBase64(raw) : null;
  if (!out) throw new CaptureError('invalid_payload', 'failed to decode request: invalid lz-string data');
  // The measure counts an unpaired surrogate as 2 bytes; encoded (as U+FFFD) it takes 3.
  if (Buffer.byteLength(out, 'utf8') > limit) throw tooLarge(limit);
  return out;
}

/** Deflate cannot expand more than ~1032:1, so no gzip body decodes past this many times its size. */
const GZIP_MAX_RATIO = 1032;

/**
 * The decoded size to reserve first: the gzip trailer's ISIZE (the decoded size of a one-member
 * gzip, as SDKs send), at most what the body could decode to, at least 64 KiB. Only a hint: the
 * output is held to what was reserved, and a body that lied is decoded again with more.
 */
function firstGunzipAllowance(bytes: Uint8Array, limit: number): number {
  const isize = bytes.length >= 18 ? Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length).readUInt32LE(bytes.length - 4) : 0;
  const most = Math.min(limit, bytes.length * GZIP_MAX_RATIO + 1024);
  return Math.min(most, Math.max(64 * 1024, isize + 1));
}

/**
 * Gunzip bounded by what it may allocate: at most `limit`, and never more than the in-flight
 * budget grants. The grant is taken before decoding (gunzipSync stops at maxOutputLength without
 * allocating past it) and sized to what this body decodes to, so small gzip requests, which
 * every browser SDK sends, hold what they use and not a share of the whole budget; what the output
 * did not use goes back at once. A body whose trailer understates its size is decoded again with
 * twice the grant: at most about twice the work of decoding it once.
 */
function gunzip(bytes: Uint8Array, limit: number, reserve: (bytes: number) => boolean, unreserve: (bytes: number) => void): Buffer {
  for (let allowance = firstGunzipAllowance(bytes, limit); ; allowance = Math.min(limit, allowance * 2)) {
    if (!reserve(allowance)) throw overloaded();
    let out: Buffer;
    try {
      out = gunzipSync(bytes, { maxOutputLength: allowance });
    } catch (err) {
      unreserve(allowance);
      if (!(err instanceof RangeError || (err as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE')) {
        throw new CaptureError('invalid_payload', 'failed to decode request: invalid gzip data', {}, { cause: err });
      }
      if (allowance >= limit) throw tooLarge(limit, { cause: err });
      continue;
    }
    unreserve(allowance - out.length);
    return out;
  }
}

/** A body whose first non-space byte opens a JSON object or array: none of the encodings apply. */
function isPlainJson(bytes: Uint8Array): boolean {
  for (const c of bytes) {
    if (c === 0x7b || c === 0x5b) return true;
    if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) return false;
  }
  return false;
}

/**
 * A request whose payload is its body, as plain JSON: nothing to decode, so parsing costs what
 * its size says. Anything else (gzip, base64, forms, lz-string, `?data=`) may expand far beyond
 * its size and is never decoded on the event loop.
 */
export function isPlainJsonRequest(body: Uint8Array, rawQuery: string, contentEncoding: string): boolean {
  return contentEncoding === '' && !/(^|&)(data|compression)=/.test(rawQuery) && isPlainJson(body);
}

/**
 * Turns a capture request into the JSON it carries: UTF-8 bytes, or a string when lz-string
 * produced it. Bytes stay bytes so large payloads can be scanned without decoding them whole.
 */
export function decodePayload(input: DecodeInput): Uint8Array | string {
  const { query } = input;
  // The common case, and the hot path for single events: a plain JSON body.
  if (input.contentEncoding === '' && !query.has('data') && !query.has('compression') && isPlainJson(input.body)) return input.body;
  let payload: Uint8Array;
  let formCompression: string | null = null;
  let decodedBase64 = false;

  const queryData = query.get('data');
  if (queryData) {
    payload = formValueBytes(queryData);
  } else {
    payload = input.body;
    if (payload.length === 0) throw new CaptureError('no_data');
    const mediaType = input.contentType.split(';')[0]!.trim().toLowerCase();
    // `curl -d '{…}'` labels JSON as a form: a form-typed body without form fields is read as
    // the payload itself (PostHog answers 400 here; no SDK relies on that).
    if (mediaType === FORM_TYPE && looksLikeForm(payload)) {
      const form = new URLSearchParams(Buffer.from(payload.buffer, payload.byteOffset, payload.length).toString('utf8'));
      const data = form.get('data');
      if (!data) throw new CaptureError('no_data');
      formCompression = form.get('compression');
      payload = formValueBytes(data);
    }
  }

  const hint = compressionOf(query.get('compression')) ?? compressionOf(formCompression) ?? compressionOf(input.contentEncoding);
  // lz-string's output is itself base64-like text: only other payloads are decoded optimistically.
  if (hint !== 'lz64' && !looksLikeForm(payload) && looksLikeBase64(payload)) {
    payload = fromBase64(payload);
    decodedBase64 = true;
  }

  const reserve = input.reserve ?? (() => true);
  const unreserve = input.unreserve ?? (() => undefined);
  if (isGzip(payload)) {
    payload = gunzip(payload, input.maxDecompressedBytes, reserve, unreserve);
  } else if (hint === 'lz64') {
    return lzString(payload, input.maxDecompressedBytes, reserve);
  } else if (hint === 'base64' && !decodedBase64) {
    payload = fromBase64(payload);
  }

  if (input.legacyPath && looksLikeBase64(payload)) payload = fromBase64(payload);
  if (payload.length === 0) throw new CaptureError('no_data');
  return payload;
}

/** The decoded payload as text (for tests and small payloads). */
export function payloadText(payload: Uint8Array | string): string {
  return typeof payload === 'string' ? payload : Buffer.from(payload.buffer, payload.byteOffset, payload.length).toString('utf8');
}

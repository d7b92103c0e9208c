import { gzipSync } from 'node:zlib';
import LZString from 'lz-string';
import { describe, expect, it, vi } from 'vitest';
import { lzBombLength, lzStringBomb } from '../../test/lz-string-bomb.js';
import { decodePayload as decodeRaw, isPlainJsonRequest, looksLikeBase64, looksLikeForm, payloadText, type DecodeInput } from './decode.js';
import { CaptureError } from '../errors.js';

const json = '{"api_key":"phc_k","event":"e","distinct_id":"d","properties":{"$current_url":"https://x.io/?a=b+c"}}';
const b64 = Buffer.from(json).toString('base64');

const decodePayload = (i: DecodeInput) => payloadText(decodeRaw(i));

function input(body: string | Uint8Array, extra: Partial<DecodeInput> = {}): DecodeInput {
  return {
    body: typeof body === 'string' ? Buffer.from(body) : body,
    query: new URLSearchParams(),
    contentType: 'application/json',
    contentEncoding: '',
    legacyPath: false,
    maxDecompressedBytes: 1024 * 1024,
    ...extra,
  };
}

function codeOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (err) {
    if (err instanceof CaptureError) return err.code;
    throw err;
  }
  return undefined;
}

describe('decode', () => {
  it('decode - plain JSON passes through', () => {
    expect(decodePayload(input(json))).toBe(json);
  });

  it('decode - gzip by Content-Encoding, by ?compression=gzip-js and by magic bytes alone', () => {
    const gz = gzipSync(json);
    expect(decodePayload(input(gz, { contentEncoding: 'gzip' }))).toBe(json);
    expect(decodePayload(input(gz, { query: new URLSearchParams('compression=gzip-js') }))).toBe(json);
    expect(decodePayload(input(gz, { contentType: 'text/plain' }))).toBe(json);
  });

  it('decode - a gzip hint on a body that is not gzip is ignored (posthog-js sends such)', () => {
    expect(decodePayload(input(json, { query: new URLSearchParams('compression=gzip-js') }))).toBe(json);
  });

  it('decode - base64 bodies are decoded optimistically', () => {
    expect(decodePayload(input(b64, { contentType: 'text/plain' }))).toBe(json);
  });

  it('decode - form data= with base64 whose + became spaces', () => {
    const withPlus = Buffer.from('{"a":">>>?"}').toString('base64');
    expect(withPlus).toContain('+');
    const form = `data=${withPlus.replace(/\+/g, ' ')}&compression=base64`;
    expect(decodePayload(input(form, { contentType: 'application/x-www-form-urlencoded' }))).toBe('{"a":">>>?"}');
    const encoded = `data=${encodeURIComponent(b64)}`;
    expect(decodePayload(input(encoded, { contentType: 'application/x-www-form-urlencoded; charset=utf-8' }))).toBe(json);
  });

  it('decode - a form-typed body without form fields is the payload itself (curl -d)', () => {
    expect(decodePayload(input(json, { contentType: 'application/x-www-form-urlencoded' }))).toBe(json);
  });

  it('decode - lz-string (lz64) from the query hint or the form field', () => {
    const lz = LZString.compressToBase64(json);
    expect(decodePayload(input(lz, { query: new URLSearchParams('compression=lz64'), contentType: 'text/plain' }))).toBe(json);
    const form = `data=${encodeURIComponent(lz)}&compression=lz64`;
    expect(decodePayload(input(form, { contentType: 'application/x-www-form-urlencoded' }))).toBe(json);
  });

  it('decode - query data= wins over the body', () => {
    const query = new URLSearchParams({ data: b64 });
    expect(decodePayload(input('', { query }))).toBe(json);
  });

  it('decode - legacy paths decode a second layer of base64', () => {
    const twice = Buffer.from(b64).toString('base64');
    expect(decodePayload(input(twice, { legacyPath: true, contentType: 'text/plain' }))).toBe(json);
  });

  it('decode - empty bodies are no_data', () => {
    expect(codeOf(() => decodePayload(input('')))).toBe('no_data');
    expect(codeOf(() => decodePayload(input('data=', { contentType: 'application/x-www-form-urlencoded' })))).toBe('no_data');
  });

  it('decode - corrupt gzip is invalid_payload, a gzip bomb is payload_too_large', () => {
    const gz = gzipSync(json);
    expect(codeOf(() => decodePayload(input(Buffer.concat([gz.subarray(0, 12), Buffer.from('garbage')]))))).toBe('invalid_payload');
    const bomb = gzipSync(Buffer.alloc(4 * 1024 * 1024, 0x20));
    expect(codeOf(() => decodePayload(input(bomb, { maxDecompressedBytes: 1024 * 1024 })))).toBe('payload_too_large');
  });

  it('decode - an lz64 bomb is payload_too_large before lz-string builds any of it', () => {
    const decompress = vi.spyOn(LZString, 'decompressFromBase64');
    try {
      const bomb = lzStringBomb(' ', 20_000); // 200 million characters from 40 KB
      expect(lzBombLength(20_000)).toBeGreaterThan(2e8);
      const query = new URLSearchParams('compression=lz64');
      expect(codeOf(() => decodePayload(input(bomb, { query, contentType: 'text/plain', maxDecompressedBytes: 1024 * 1024 })))).toBe('payload_too_large');
      expect(decompress).not.toHaveBeenCalled();
      // Within the limit it decodes as before.
      const lz = LZString.compressToBase64(json);
      expect(decodePayload(input(lz, { query, contentType: 'text/plain' }))).toBe(json);
      expect(decompress).toHaveBeenCalledTimes(1);
    } finally {
      decompress.mockRestore();
    }
  });

  it('decode - the lz64 decompressed limit counts UTF-8 bytes, not UTF-16 units', () => {
    const text = JSON.stringify({ api_key: 'phc_k', event: '€'.repeat(1000), distinct_id: 'd' });
    const lz = LZString.compressToBase64(text);
    const query = new URLSearchParams('compression=lz64');
    expect(text.length).toBeLessThan(1100);
    expect(Buffer.byteLength(text)).toBeGreaterThan(3000);
    expect(codeOf(() => decodePayload(input(lz, { query, maxDecompressedBytes: 2000 })))).toBe('payload_too_large');
    expect(decodePayload(input(lz, { query, maxDecompressedBytes: Buffer.byteLength(text) }))).toBe(text);
  });

  it('decode - corrupt lz64 is invalid_payload', () => {
    const query = new URLSearchParams('compression=lz64');
    expect(codeOf(() => decodePayload(input(LZString.compressToBase64(json).slice(0, 20), { query })))).toBe('invalid_payload');
  });

  it('decode - sniffing helpers', () => {
    expect(looksLikeForm(Buffer.from('data=abc'))).toBe(true);
    expect(looksLikeForm(Buffer.from('ver=1&data=abc'))).toBe(true);
    expect(looksLikeForm(Buffer.from('{"data=":1}'))).toBe(false);
    expect(looksLikeBase64(Buffer.from(b64))).toBe(true);
    expect(looksLikeBase64(Buffer.from(json))).toBe(false);
  });

  it('decode - only plain JSON bodies count as plain: anything encoded may expand beyond its size', () => {
    expect(isPlainJsonRequest(Buffer.from(json), '_=1&ver=2', '')).toBe(true);
    expect(isPlainJsonRequest(Buffer.from(' [{}]'), '', '')).toBe(true);
    expect(isPlainJsonRequest(gzipSync(json), '', '')).toBe(false);
    expect(isPlainJsonRequest(Buffer.from(gzipSync(json).toString('base64')), '', '')).toBe(false);
    expect(isPlainJsonRequest(Buffer.from(`data=${b64}`), '', '')).toBe(false);
    expect(isPlainJsonRequest(Buffer.from(json), 'compression=lz64', '')).toBe(false);
    expect(isPlainJsonRequest(Buffer.from(json), 'ip=1&data=x', '')).toBe(false);
    expect(isPlainJsonRequest(Buffer.from(json), '', 'gzip')).toBe(false);
  });
});

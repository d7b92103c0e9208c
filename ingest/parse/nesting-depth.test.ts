import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { CaptureError } from '../errors.js';
import { nestsDeeperThan, skipString } from './nesting-depth.js';
import { parseCaptureRequest, type RequestMeta } from './parse-request.js';

const nested = (levels: number) => '['.repeat(levels) + ']'.repeat(levels);
const meta: RequestMeta = { route: 'batch', query: '', contentType: 'application/json', contentEncoding: '', ip: undefined, nowMs: Date.now() };
const lookup = () => ({ projectId: 1, organizationId: 'o' });
const limits = { maxDecompressedBytes: 64 * 1024 * 1024, maxMessageBytes: 1024 * 1024, shardCount: 4, maxNestingDepth: 128 };

/** A batch whose one event has `levels` levels in total, counted from the payload's root. */
function batchWithDepth(levels: number, padEvents = 0): Buffer {
  // root object (1) → batch array (2) → event (3) → properties (4) → x: arrays from level 5 on
  const inner = nested(levels - 4);
  const pad = Array.from({ length: padEvents }, (_, i) => `{"event":"pad","distinct_id":"p${i}","properties":{"s":"${'x'.repeat(300)}"}}`);
  return Buffer.from(`{"api_key":"phc_k","batch":[${[...pad, `{"event":"e","distinct_id":"a","properties":{"x":${inner}}}`].join(',')}]}`);
}

function errorOf(fn: () => unknown): CaptureError | undefined {
  try {
    fn();
  } catch (err) {
    if (err instanceof CaptureError) return err;
    throw err;
  }
  return undefined;
}

describe('nesting depth', () => {
  it('nesting - counts levels from the root, ignores brackets inside strings', () => {
    expect(nestsDeeperThan(Buffer.from(nested(128)), 128)).toBe(false);
    expect(nestsDeeperThan(Buffer.from(nested(129)), 128)).toBe(true);
    const inStrings = `{"a":"${'['.repeat(500)}","b":"\\"${'{'.repeat(500)}"}`;
    expect(nestsDeeperThan(Buffer.from(inStrings), 128)).toBe(false);
    expect(nestsDeeperThan(nested(129), 128)).toBe(true); // lz-string payloads are strings
  });

  it('nesting - 128 levels are accepted, 129 are invalid_event naming the limit, small and scanned payloads alike', () => {
    for (const pad of [0, 500]) {
      // 500 padding events make the payload large enough to be scanned event by event.
      expect(parseCaptureRequest(batchWithDepth(128, pad), meta, limits, lookup).accepted).toBe(pad + 1);
      const err = errorOf(() => parseCaptureRequest(batchWithDepth(129, pad), meta, limits, lookup));
      expect(err?.code).toBe('invalid_event');
      expect(err?.message).toContain('deeper than 128 levels');
    }
  });

  it('nesting - 16,000 levels are refused without a stack overflow', () => {
    for (const pad of [0, 500]) {
      expect(errorOf(() => parseCaptureRequest(batchWithDepth(16_000, pad), meta, limits, lookup))?.code).toBe('invalid_event');
    }
    const single = Buffer.from(`{"api_key":"phc_k","event":"e","distinct_id":"a","properties":{"x":${nested(16_000)}}}`);
    expect(errorOf(() => parseCaptureRequest(single, { ...meta, route: 'capture' }, limits, lookup))?.code).toBe('invalid_event');
  });
});

describe('string ends', () => {
  it('skip string - finds the closing quote JSON finds, with escapes on either side of the short-string walk', () => {
    // Strings are walked byte by byte up to 32 bytes, then searched natively: escapes (\" and \\)
    // placed around that boundary must not be taken for, or hide, the closing quote.
    fc.assert(
      fc.property(fc.string({ unit: fc.constantFrom('a', 'é', '"', '\\', '\\"', '\n', '🦔'), maxLength: 80 }), fc.nat(40), (text, lead) => {
        const literal = JSON.stringify(text);
        const bytes = Buffer.from(`${' '.repeat(lead)}${literal},"next"`);
        expect(skipString(bytes, lead)).toBe(lead + Buffer.byteLength(literal));
      }),
      { numRuns: 2_000 },
    );
    expect(skipString(Buffer.from('"never closed\\"'), 0)).toBe(-1);
  });
});

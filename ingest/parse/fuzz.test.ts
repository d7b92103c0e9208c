// Property-based: decode → parse → normalise never fails with anything but a client error, and
// what it accepts is exactly what capture must store.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseNdjson } from '../../lib/index.js';
import { fuzzRequestArb } from '../../test/capture-fuzz.js';
import { captureErrorResponse, CaptureError } from '../errors.js';
import { parseCaptureRequest, type RequestMeta, type RouteKind } from './index.js';

const KEY = 'phc_fuzz';
const limits = { maxDecompressedBytes: 5 * 1024 * 1024, maxMessageBytes: 1024 * 1024, shardCount: 16 };
const lookup = (token: string) => (token === KEY ? { projectId: 1, organizationId: 'o' } : undefined);
const routeKind: Record<string, RouteKind> = { '/capture/': 'capture', '/batch/': 'batch', '/e/': 'e', '/i/v0/e/': 'i', '/track/': 'track', '/engage/': 'engage' };

describe('capture fuzzing', () => {
  it('fuzz - random requests in random encodings: a parse or a 4xx CaptureError, never anything else', () => {
    fc.assert(
      fc.property(fuzzRequestArb(KEY), (r) => {
        const meta: RequestMeta = { route: routeKind[r.route]!, query: r.query, contentType: r.headers['content-type'] ?? '', contentEncoding: r.headers['content-encoding'] ?? '', ip: '127.0.0.1', nowMs: Date.now() };
        try {
          const parsed = parseCaptureRequest(r.body, meta, limits, lookup);
          const events = parseNdjson<{ properties: { fuzz_marker?: string } }>(parsed.data);
          expect(events).toHaveLength(parsed.accepted);
          if (r.marker !== undefined) expect(events.filter((e) => e.properties.fuzz_marker === r.marker)).toHaveLength(r.expectedEvents);
        } catch (err) {
          if (!(err instanceof CaptureError)) throw err;
          expect(captureErrorResponse(err).status).toBeLessThan(500);
        }
      }),
      { numRuns: 2000 },
    );
  });
});

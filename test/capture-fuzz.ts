// fast-check arbitraries for capture requests: random bytes, random JSON, plausible events, and
// the encodings SDKs use (gzip, base64, form data=, lz64) applied in random mixes.
import { gzipSync } from 'node:zlib';
import fc from 'fast-check';
import LZString from 'lz-string';

export const ROUTES = ['/capture/', '/batch/', '/e/', '/i/v0/e/', '/track/', '/engage/'] as const;

export interface FuzzRequest {
  route: (typeof ROUTES)[number];
  query: string;
  headers: Record<string, string>;
  body: Buffer;
  /** Events a 200 must have stored: those with a name and a distinct_id, by marker. */
  marker: string | undefined;
  expectedEvents: number;
}

/** A plausible event (sometimes missing its name or id), marked so a test can find it. */
const eventArb = (marker: string) =>
  fc.record(
    {
      event: fc.oneof(fc.constantFrom('$pageview', 'clicked', ''), fc.string()),
      distinct_id: fc.oneof(fc.string({ minLength: 1, maxLength: 40 }), fc.integer(), fc.constant('')),
      properties: fc.dictionary(fc.string({ maxLength: 10 }), fc.jsonValue({ maxDepth: 3 }), { maxKeys: 5 }).map((p) => ({ ...p, fuzz_marker: marker })),
      timestamp: fc.oneof(fc.constant(undefined), fc.date({ noInvalidDate: true }).map((d) => d.toISOString()), fc.string()),
      uuid: fc.oneof(fc.constant(undefined), fc.uuid(), fc.string()),
    },
    { requiredKeys: ['properties'] },
  );

/** Whether capture stores this event (spec: a name and a non-empty distinct_id; /engage names it $identify). */
function stored(e: { event?: unknown; distinct_id?: unknown; properties: Record<string, unknown> }, engage: boolean): boolean {
  const name = e.event === undefined && engage ? '$identify' : e.event;
  if (typeof name !== 'string' || name.length === 0 || name === '$performance_event') return false;
  const id = e.distinct_id ?? e.properties.distinct_id;
  if (id === undefined || id === null) return false;
  return (typeof id === 'string' ? id : JSON.stringify(id)).length > 0;
}

type Encoding = 'plain' | 'gzip' | 'gzip-hint' | 'base64' | 'form' | 'form-gzip' | 'lz64' | 'query-data';

function encode(json: Buffer, encoding: Encoding): { body: Buffer; query: string; headers: Record<string, string> } {
  switch (encoding) {
    case 'plain':
      return { body: json, query: '', headers: { 'content-type': 'application/json' } };
    case 'gzip':
      return { body: gzipSync(json), query: '', headers: { 'content-encoding': 'gzip' } };
    case 'gzip-hint':
      return { body: gzipSync(json), query: 'compression=gzip-js', headers: { 'content-type': 'text/plain' } };
    case 'base64':
      return { body: Buffer.from(json.toString('base64')), query: '', headers: { 'content-type': 'text/plain' } };
    case 'form':
      return { body: Buffer.from(`data=${encodeURIComponent(json.toString('base64'))}`), query: '', headers: { 'content-type': 'application/x-www-form-urlencoded' } };
    case 'form-gzip':
      return { body: Buffer.from(`data=${encodeURIComponent(gzipSync(json).toString('base64'))}&compression=gzip-js`), query: '', headers: { 'content-type': 'application/x-www-form-urlencoded' } };
    case 'lz64':
      return { body: Buffer.from(`data=${encodeURIComponent(LZString.compressToBase64(json.toString('utf8')))}`), query: 'compression=lz64', headers: { 'content-type': 'application/x-www-form-urlencoded' } };
    case 'query-data':
      return { body: Buffer.alloc(0), query: `data=${encodeURIComponent(json.toString('base64'))}`, headers: {} };
  }
}

const encodingArb = fc.constantFrom<Encoding>('plain', 'gzip', 'gzip-hint', 'base64', 'form', 'form-gzip', 'lz64', 'query-data');

/** Requests of every kind: junk bytes, random JSON, and batches of plausible events, encoded. */
export function fuzzRequestArb(apiKey: string): fc.Arbitrary<FuzzRequest> {
  const junk = fc.record({ route: fc.constantFrom(...ROUTES), bytes: fc.uint8Array({ maxLength: 2000 }), encoding: encodingArb }).map(({ route, bytes, encoding }) => {
    const e = encode(Buffer.from(bytes), encoding);
    return { route, ...e, marker: undefined, expectedEvents: 0 } satisfies FuzzRequest;
  });
  const randomJson = fc.record({ route: fc.constantFrom(...ROUTES), value: fc.jsonValue({ maxDepth: 6 }), encoding: encodingArb, withKey: fc.boolean() }).map(({ route, value, encoding, withKey }) => {
    const payload = withKey && typeof value === 'object' && value !== null && !Array.isArray(value) ? { ...value, api_key: apiKey } : value;
    const e = encode(Buffer.from(JSON.stringify(payload) ?? 'null'), encoding);
    return { route, ...e, marker: undefined, expectedEvents: 0 } satisfies FuzzRequest;
  });
  const events = fc
    .record({ route: fc.constantFrom(...ROUTES), marker: fc.uuid(), encoding: encodingArb, shape: fc.constantFrom('batch', 'array', 'single') })
    .chain(({ route, marker, encoding, shape }) =>
      fc.array(eventArb(marker), { minLength: 1, maxLength: shape === 'single' ? 1 : 30 }).map((list) => {
        const payload = shape === 'batch' ? { api_key: apiKey, batch: list } : shape === 'array' ? list.map((e) => ({ ...e, api_key: apiKey })) : { ...list[0], api_key: apiKey };
        const e = encode(Buffer.from(JSON.stringify(payload)), encoding);
        return { route, ...e, marker, expectedEvents: list.filter((ev) => stored(ev, route === '/engage/')).length } satisfies FuzzRequest;
      }),
    );
  return fc.oneof(junk, randomJson, events);
}

// Every way a capture request can fail: the status, the body's code, and that nothing was
// published. Also the spec's silent drops (200, nothing stored, counted in /metrics).
import { request } from 'node:http';
import { connect } from 'node:net';
import { gzipSync } from 'node:zlib';
import LZString from 'lz-string';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { post, startIngestHarness, type IngestHarness } from '../test/ingest-harness.js';
import { lzBombLength, lzStringBomb } from '../test/lz-string-bomb.js';
import { waitFor } from '../test/kit/index.js';

const KEY = 'phc_errors_test';
const MAX = 20 * 1024 * 1024;

async function expectError(res: Response, status: number, code: string): Promise<Record<string, unknown>> {
  expect(res.status).toBe(status);
  const body = (await res.json()) as Record<string, unknown>;
  expect(body).toMatchObject({ code });
  expect(Object.keys(body).sort()).toEqual(['attr', 'code', 'detail', 'type']);
  expect(typeof body.detail).toBe('string');
  return body;
}

/** Sends a raw request and resolves with the status the server answered (even mid-upload). */
function rawPost(url: string, headers: Record<string, string | number>, write: (req: ReturnType<typeof request>) => void): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: 'POST', headers }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    write(req);
  });
}

describe('capture errors', () => {
  let h: IngestHarness;
  const ok = { api_key: KEY, event: 'e', distinct_id: 'u' };
  beforeAll(async () => {
    h = await startIngestHarness({ MAX_DECOMPRESSED_BYTES: '50MiB' }, { [KEY]: 1 });
  });
  afterAll(() => h.stop());

  const cases: [string, () => Promise<Response>, number, string][] = [
    ['invalid JSON', () => post(`${h.url}/capture/`, '{"api_key":'), 400, 'invalid_json'],
    ['undecodable gzip', () => post(`${h.url}/batch/`, Buffer.from([0x1f, 0x8b, 1, 2, 3]), { 'content-encoding': 'gzip' }), 400, 'invalid_payload'],
    ['form-typed body that is neither form nor JSON', () => post(`${h.url}/e/`, 'hello', { 'content-type': 'application/x-www-form-urlencoded' }), 400, 'invalid_json'],
    ['empty body', () => post(`${h.url}/capture/`, ''), 400, 'no_data'],
    ['a JSON value that is no event', () => post(`${h.url}/capture/`, '42'), 400, 'invalid_payload'],
    ['empty batch', () => post(`${h.url}/batch/`, JSON.stringify({ api_key: KEY, batch: [] })), 400, 'empty_batch'],
    ['empty array', () => post(`${h.url}/batch/`, '[]'), 400, 'empty_batch'],
    ['an event that is not an object', () => post(`${h.url}/batch/`, JSON.stringify({ api_key: KEY, batch: [ok, 'x'] })), 400, 'invalid_event'],
    ['no project key', () => post(`${h.url}/capture/`, JSON.stringify({ event: 'e', distinct_id: 'u' })), 401, 'missing_api_key'],
    ['empty key', () => post(`${h.url}/capture/`, JSON.stringify({ ...ok, api_key: '' })), 401, 'invalid_api_key'],
    ['key over 64 chars', () => post(`${h.url}/capture/`, JSON.stringify({ ...ok, api_key: 'phc_' + 'x'.repeat(61) })), 401, 'invalid_api_key'],
    ['non-ASCII key', () => post(`${h.url}/capture/`, JSON.stringify({ ...ok, api_key: 'phc_ключ' })), 401, 'invalid_api_key'],
    ['personal API key', () => post(`${h.url}/capture/`, JSON.stringify({ ...ok, api_key: 'phx_abcdef' })), 401, 'invalid_api_key'],
    ['key not in the registry', () => post(`${h.url}/capture/`, JSON.stringify({ ...ok, api_key: 'phc_unknown' })), 401, 'unknown_api_key'],
    ['different keys in one batch', () => post(`${h.url}/batch/`, JSON.stringify([ok, { ...ok, api_key: 'phc_other' }])), 401, 'inconsistent_api_key'],
    ['unknown route', () => post(`${h.url}/nope/`, '{}'), 404, 'not_found'],
    ['wrong method', () => fetch(`${h.url}/capture/`, { method: 'PUT', body: '{}' }), 405, 'method_not_allowed'],
    ['one event larger than a message', () => post(`${h.url}/batch/`, JSON.stringify({ api_key: KEY, batch: [{ ...ok, properties: { big: 'x'.repeat(2 * 1024 * 1024) } }] })), 413, 'event_too_large'],
  ];

  for (const [name, send, status, code] of cases) {
    it(`errors - ${name} → ${status} ${code}, nothing published`, async () => {
      const before = await h.totalMessages();
      await expectError(await send(), status, code);
      expect(await h.totalMessages()).toBe(before);
    });
  }

  it('errors - malformed keys name the reason in detail and attr', async () => {
    const body = await expectError(await post(`${h.url}/capture/`, JSON.stringify({ ...ok, api_key: 'phx_abcdef' })), 401, 'invalid_api_key');
    expect(body).toMatchObject({ type: 'authentication_error', detail: 'API key is not valid: personal_api_key', attr: 'api_key' });
  });

  it('errors - events without name or distinct_id are dropped, the request still answers 200, and drops are counted', async () => {
    const before = await h.totalMessages();
    const droppedBefore = await h.metric('spate_ingest_events_dropped_total');
    const res = await post(
      `${h.url}/batch/`,
      JSON.stringify({ api_key: KEY, batch: [{ distinct_id: 'a' }, { event: 'e' }, { event: 'e', distinct_id: '' }, { event: '', distinct_id: 'b' }] }),
    );
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ status: 1 });
    expect(await h.totalMessages()).toBe(before);
    expect(await h.metric('spate_ingest_events_dropped_total')).toBe(droppedBefore + 4);
    expect(await h.metric('spate_ingest_events_dropped_total', { reason: 'empty_distinct_id' })).toBeGreaterThanOrEqual(1);
    expect(await h.metric('spate_ingest_events_dropped_total', { reason: 'missing_distinct_id' })).toBeGreaterThanOrEqual(1);
    expect(await h.metric('spate_ingest_events_dropped_total', { reason: 'missing_event_name' })).toBeGreaterThanOrEqual(2);
  });

  it('errors - a 20 MiB batch is accepted whole', async () => {
    const event = (i: number) => ({ event: 'big', distinct_id: `bulk-${String(i % 1000).padStart(4, '0')}`, properties: { pad: 'p'.repeat(900) } });
    const per = JSON.stringify(event(0)).length + 1;
    const head = `{"api_key":"${KEY}","batch":[`;
    const count = Math.floor((MAX - head.length - 2) / per);
    let body = head + Array.from({ length: count }, (_, i) => JSON.stringify(event(i))).join(',') + ']}';
    body = body.slice(0, -2) + ' '.repeat(MAX - body.length) + ']}';
    expect(Buffer.byteLength(body)).toBe(MAX);
    const before = (await h.events('events')).length;
    const res = await post(`${h.url}/batch/`, body);
    expect(res.status).toBe(200);
    expect((await h.events('events')).length - before).toBe(count);
  });

  it('errors - 20 MiB + 1 byte with Content-Length gets 413 before the body is read', async () => {
    const before = await h.totalMessages();
    const res = await rawPost(`${h.url}/batch/`, { 'content-length': MAX + 1 }, (req) => req.write('{')); // body never completes
    expect(res.status).toBe(413);
    expect(JSON.parse(res.body)).toMatchObject({ code: 'payload_too_large' });
    expect(await h.totalMessages()).toBe(before);
  });

  it('errors - a chunked body gets 413 as soon as it passes 20 MiB', async () => {
    const before = await h.totalMessages();
    const res = await rawPost(`${h.url}/batch/`, { 'transfer-encoding': 'chunked' }, (req) => {
      const chunk = Buffer.alloc(1024 * 1024, 0x20);
      let sent = 0;
      const pump = () => {
        while (sent <= 21 && req.write(chunk)) sent++;
        if (sent <= 21) req.once('drain', pump);
      };
      req.on('error', () => undefined);
      pump();
    });
    expect(res.status).toBe(413);
    expect(await h.totalMessages()).toBe(before);
  });

  it('errors - a gzip bomb (small on the wire, huge decoded) gets 413', async () => {
    const bomb = gzipSync(Buffer.alloc(80 * 1024 * 1024, 0x20));
    expect(bomb.length).toBeLessThan(1024 * 1024);
    const before = await h.totalMessages();
    await expectError(await post(`${h.url}/batch/`, bomb, { 'content-encoding': 'gzip' }), 413, 'payload_too_large');
    expect(await h.totalMessages()).toBe(before);
  });

  it('errors - an lz64 bomb (small on the wire, huge decoded) gets 413 for the decompressed limit', async () => {
    const bomb = lzStringBomb(' ', 40_000); // 800 million characters from 85 KB
    expect(lzBombLength(40_000)).toBeGreaterThan(8e8);
    const before = await h.totalMessages();
    const body = await expectError(await post(`${h.url}/e/?compression=lz64`, bomb, { 'content-type': 'text/plain' }), 413, 'payload_too_large');
    // Refused by its measured size, not by a parse thread running out of heap while building it.
    expect(body.detail).toBe(`decompressed payload exceeds ${50 * 1024 * 1024} bytes`);
    expect(await h.totalMessages()).toBe(before);
  });

  it('errors - a request aborted mid-body leaks no budget and publishes nothing', async () => {
    const before = await h.totalMessages();
    const socket = connect(new URL(h.url).port as unknown as number, '127.0.0.1');
    await new Promise((r) => socket.once('connect', r));
    // Bytes are held as they arrive (not as the head declares them): 90,000 of 100,000 sent.
    const partial = `{"api_key":"${KEY}","batch":[`.padEnd(90_000, ' ');
    socket.write(`POST /batch/ HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n${partial}`);
    await waitFor('bytes in flight', async () => (await h.metric('spate_ingest_inflight_bytes')) === 90_000);
    socket.destroy();
    await waitFor('budget released', async () => (await h.metric('spate_ingest_inflight_bytes')) === 0);
    expect(await h.totalMessages()).toBe(before);
  });
});

describe('capture errors - capacity and broken dependencies', () => {
  it('errors - over the in-flight byte budget → 503 with Retry-After, then fine again', async () => {
    await using h = await startIngestHarness({ INFLIGHT_BUDGET_BYTES: '64KiB', RETRY_AFTER_SECONDS: '2' }, { [KEY]: 1 });
    const socket = connect(Number(new URL(h.url).port), '127.0.0.1');
    await new Promise((r) => socket.once('connect', r));
    // Holds 63,999 of 65,536 bytes: what it sent of its 64,000 (bytes are held as they arrive).
    socket.write(`POST /batch/ HTTP/1.1\r\nHost: x\r\nContent-Length: 64000\r\n\r\n${'{'.padEnd(63_999, ' ')}`);
    await waitFor('budget held', async () => (await h.metric('spate_ingest_inflight_bytes')) === 63_999);
    const body = JSON.stringify({ api_key: KEY, batch: Array.from({ length: 100 }, (_, i) => ({ event: 'e', distinct_id: `d${i}` })) });
    const res = await post(`${h.url}/batch/`, body);
    await expectError(res, 503, 'overloaded');
    expect(res.headers.get('retry-after')).toBe('2');
    socket.destroy();
    await waitFor('budget released', async () => (await h.metric('spate_ingest_inflight_bytes')) === 0);
    expect((await post(`${h.url}/batch/`, body)).status).toBe(200);
  });

  it('errors - a body needing more than PARSE_THREAD_MAX_HEAP gets 413, and the next request is served', async () => {
    await using h = await startIngestHarness({ PARSE_THREAD_MAX_HEAP: '16MiB' }, { [KEY]: 1 });
    // An array without a batch-level key: every event is parsed before the first is used.
    const events = Array.from({ length: 40_000 }, (_, i) => ({ api_key: KEY, event: 'e', distinct_id: `d${i}`, properties: { i, pad: 'x'.repeat(100) } }));
    const before = await h.totalMessages();
    await expectError(await post(`${h.url}/batch/`, JSON.stringify(events)), 413, 'payload_too_large');
    expect(await h.totalMessages()).toBe(before);
    const ok = await post(`${h.url}/batch/`, JSON.stringify({ api_key: KEY, batch: events.slice(0, 500) }));
    expect(ok.status).toBe(200);
  });

  it('errors - a small compressed body that decodes to more than the budget allows gets 503 while others hold budget, 200 alone', async () => {
    await using h = await startIngestHarness({ INFLIGHT_BUDGET_BYTES: '1MiB' }, { [KEY]: 1 });
    const events = Array.from({ length: 20_000 }, (_, i) => ({ event: 'e', distinct_id: `d${i % 100}`, properties: { i } }));
    const gz = gzipSync(JSON.stringify({ api_key: KEY, batch: events }));
    expect(gz.length).toBeLessThan(200 * 1024); // small on the wire, several MB decoded
    const socket = connect(Number(new URL(h.url).port), '127.0.0.1');
    await new Promise((r) => socket.once('connect', r));
    socket.write(`POST /batch/ HTTP/1.1\r\nHost: x\r\nContent-Length: 300000\r\n\r\n${'{'.padEnd(299_999, ' ')}`);
    await waitFor('budget held', async () => (await h.metric('spate_ingest_inflight_bytes')) === 299_999);
    const before = await h.totalMessages();
    const refused = await post(`${h.url}/batch/`, gz, { 'content-encoding': 'gzip' });
    await expectError(refused, 503, 'overloaded');
    expect(await h.totalMessages()).toBe(before);
    socket.destroy();
    await waitFor('budget released', async () => (await h.metric('spate_ingest_inflight_bytes')) === 0);
    expect((await post(`${h.url}/batch/`, gz, { 'content-encoding': 'gzip' })).status).toBe(200);
    await waitFor('budget released again', async () => (await h.metric('spate_ingest_inflight_bytes')) === 0);
  });

  it('errors - encoded bodies are never decoded on the event loop, however small', async () => {
    await using h = await startIngestHarness({}, { [KEY]: 1 });
    const body = JSON.stringify({ api_key: KEY, batch: [{ event: 'e', distinct_id: 'u' }] });
    const thread = () => h.metric('spate_ingest_parses_total', { where: 'thread' });
    const inline = () => h.metric('spate_ingest_parses_total', { where: 'inline' });
    const [t0, i0] = [await thread(), await inline()];
    expect((await post(`${h.url}/batch/`, body)).status).toBe(200);
    expect([await thread(), await inline()]).toEqual([t0, i0 + 1]);
    const wrapped = [
      () => post(`${h.url}/e/`, gzipSync(body).toString('base64'), { 'content-type': 'text/plain' }),
      () => post(`${h.url}/e/`, `data=${encodeURIComponent(gzipSync(body).toString('base64'))}`, { 'content-type': 'application/x-www-form-urlencoded' }),
      () => post(`${h.url}/e/?compression=lz64`, LZString.compressToBase64(body)),
      () => post(`${h.url}/batch/`, gzipSync(body), { 'content-encoding': 'gzip' }),
    ];
    for (const send of wrapped) expect((await send()).status).toBe(200);
    expect([await thread(), await inline()]).toEqual([t0 + wrapped.length, i0 + 1]);
  });

  it('errors - NATS stopped → 503 with Retry-After; NATS back → 200 without restarting the node', async () => {
    await using h = await startIngestHarness({}, { [KEY]: 1 });
    const body = JSON.stringify({ api_key: KEY, event: 'e', distinct_id: 'u' });
    expect((await post(`${h.url}/capture/`, body)).status).toBe(200);
    await h.nats.node.stop();
    await waitFor('503 while NATS is down', async () => (await post(`${h.url}/capture/`, body)).status === 503);
    const res = await post(`${h.url}/capture/`, body);
    await expectError(res, 503, 'unavailable');
    expect(res.headers.get('retry-after')).toBe('1');
    expect((await fetch(`${h.url}/_ready`)).status).toBe(503);
    await h.nats.node.start();
    await waitFor('200 once NATS is back', async () => (await post(`${h.url}/capture/`, body)).status === 200, 30_000);
    expect((await fetch(`${h.url}/_ready`)).status).toBe(200);
    // Every 200 is stored: the two we got, and nothing that was refused.
    expect((await h.events('events')).length).toBeGreaterThanOrEqual(2);
  });
});

// The capture surface: routes, methods, CORS, health endpoints, routing to streams, the
// project key registry, and the message format on the wire.
import { connect } from 'node:net';
import { gzipSync } from 'node:zlib';
import LZString from 'lz-string';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { shardOf, subjectFor } from '../lib/index.js';
import { post, startIngestHarness, type IngestHarness } from '../test/ingest-harness.js';
import { waitFor } from '../test/kit/index.js';

const KEY = 'phc_capture_test';

/**
 * Writes a raw request in pieces of the given sizes, 20 ms apart (so the server reads each on its
 * own), the rest in one piece; resolves with everything answered before the connection closed.
 */
function rawHead(url: string, text: string, pieces: number[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(Number(new URL(url).port), '127.0.0.1');
    socket.setNoDelay(true);
    let answer = '';
    socket.on('data', (chunk: Buffer) => (answer += chunk.toString('latin1')));
    socket.on('close', () => resolve(answer));
    // A server that closed the connection may reset our later writes: that is an answer too.
    socket.on('error', (err: NodeJS.ErrnoException) => (err.code === 'ECONNRESET' || err.code === 'EPIPE' ? resolve(answer) : reject(err)));
    let sent = 0;
    const writeNext = (i: number) => {
      if (sent >= text.length || socket.destroyed) return;
      const size = Math.min(pieces[i] ?? Number.POSITIVE_INFINITY, text.length - sent);
      socket.write(text.slice(sent, sent + size));
      sent += size;
      setTimeout(() => writeNext(i + 1), 20);
    };
    socket.once('connect', () => writeNext(0));
  });
}
const event = (distinctId: string, name = 'e', extra: Record<string, unknown> = {}) => ({ event: name, distinct_id: distinctId, properties: { n: 1 }, ...extra });

describe('capture', () => {
  let h: IngestHarness;
  beforeAll(async () => {
    h = await startIngestHarness({ SPIKE_EVENTS_PER_SECOND: '10', SPIKE_BURST: '20' }, { [KEY]: 5 });
  });
  afterAll(() => h.stop());

  const paths = ['/capture', '/batch', '/e', '/i/v0/e', '/track', '/engage'];
  for (const path of paths) {
    for (const slash of ['', '/']) {
      it(`capture - POST ${path}${slash} stores the event`, async () => {
        const id = `route-${path}${slash}`;
        const res = await post(`${h.url}${path}${slash}`, JSON.stringify({ api_key: KEY, ...event(id) }));
        expect(res.status).toBe(200);
        expect(await res.json()).toEqual({ status: 1 });
        const stored = (await h.events('events')).filter((e) => e.distinct_id === id);
        expect(stored).toHaveLength(1);
      });
    }
  }

  it('capture - GET with ?data= (base64) stores the event', async () => {
    const data = Buffer.from(JSON.stringify({ api_key: KEY, ...event('via-get') })).toString('base64');
    const res = await fetch(`${h.url}/e/?data=${encodeURIComponent(data)}`);
    expect(res.status).toBe(200);
    expect((await h.events('events')).filter((e) => e.distinct_id === 'via-get')).toHaveLength(1);
  });

  it('capture - OPTIONS preflight mirrors origin and requested headers, allows credentials', async () => {
    const res = await fetch(`${h.url}/e/`, {
      method: 'OPTIONS',
      headers: { origin: 'https://app.example.com', 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type,x-custom' },
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('access-control-allow-origin')).toBe('https://app.example.com');
    expect(res.headers.get('access-control-allow-headers')).toBe('content-type,x-custom');
    expect(res.headers.get('access-control-allow-credentials')).toBe('true');
    expect(res.headers.get('access-control-allow-methods')).toContain('POST');
  });

  it('capture - answers carry CORS headers for the request origin, errors too', async () => {
    const ok = await post(`${h.url}/e/`, JSON.stringify({ api_key: KEY, ...event('cors') }), { origin: 'https://site.test' });
    expect(ok.headers.get('access-control-allow-origin')).toBe('https://site.test');
    const bad = await post(`${h.url}/e/`, '{', { origin: 'https://site.test' });
    expect(bad.status).toBe(400);
    expect(bad.headers.get('access-control-allow-origin')).toBe('https://site.test');
  });

  it('capture - beacon=1 answers 204 with no body', async () => {
    const res = await post(`${h.url}/e/?beacon=1`, JSON.stringify({ api_key: KEY, ...event('beacon') }));
    expect(res.status).toBe(204);
    expect(await res.text()).toBe('');
  });

  it('capture - gzip (header and magic bytes), lz64 and form bodies', async () => {
    const body = (id: string) => JSON.stringify({ api_key: KEY, batch: [event(id)] });
    expect((await post(`${h.url}/batch/`, gzipSync(body('gz-header')), { 'content-encoding': 'gzip' })).status).toBe(200);
    expect((await post(`${h.url}/e/`, gzipSync(body('gz-magic')), { 'content-type': 'text/plain' })).status).toBe(200);
    expect((await post(`${h.url}/e/?compression=lz64`, LZString.compressToBase64(body('lz64')))).status).toBe(200);
    const form = `data=${encodeURIComponent(Buffer.from(body('form')).toString('base64'))}`;
    expect((await post(`${h.url}/e/`, form, { 'content-type': 'application/x-www-form-urlencoded' })).status).toBe(200);
    const ids = new Set((await h.events('events')).map((e) => e.distinct_id));
    for (const id of ['gz-header', 'gz-magic', 'lz64', 'form']) expect(ids.has(id)).toBe(true);
  });

  it('capture - events go to events.<project>.<shard> in NDJSON messages with Nats-Msg-Id and Spate-Events', async () => {
    const batch = Array.from({ length: 200 }, (_, i) => event(`wire-${i % 40}`, `w${i}`));
    expect((await post(`${h.url}/batch/`, JSON.stringify({ api_key: KEY, batch }))).status).toBe(200);
    const messages = (await h.messages('events')).filter((m) => m.events.some((e) => e.distinct_id.startsWith('wire-')));
    const ids = new Set<string>();
    for (const m of messages) {
      expect(m.eventCount).toBe(m.events.length);
      expect(m.msgId).toBeTruthy();
      ids.add(m.msgId!);
      for (const e of m.events) {
        expect(m.subject).toBe(subjectFor('events', 5, shardOf(e.distinct_id, 16)));
        expect(e.project_id).toBe(5);
      }
    }
    expect(ids.size).toBe(messages.length);
    expect(messages.flatMap((m) => m.events).filter((e) => e.distinct_id.startsWith('wire-'))).toHaveLength(200);
    // per distinct_id, request order is kept
    for (let d = 0; d < 40; d++) {
      const names = messages.flatMap((m) => m.events).filter((e) => e.distinct_id === `wire-${d}`).map((e) => Number(e.event.slice(1)));
      expect(names).toEqual([...names].sort((a, b) => a - b));
    }
  });

  it('capture - historical_migration goes to HISTORICAL and is never diverted', async () => {
    const batch = Array.from({ length: 100 }, (_, i) => event('migrated-user', `h${i}`, { timestamp: '2020-01-02T03:04:05Z' }));
    expect((await post(`${h.url}/batch/`, JSON.stringify({ api_key: KEY, historical_migration: true, batch }))).status).toBe(200);
    const stored = (await h.events('historical')).filter((e) => e.distinct_id === 'migrated-user');
    expect(stored.map((e) => e.event)).toEqual(batch.map((e) => e.event));
    expect((await h.events('overflow')).some((e) => e.distinct_id === 'migrated-user')).toBe(false);
  });

  it('capture - a historical batch sent again (same uuids) is stored once; a different batch is not mistaken for it', async () => {
    const uuid = (i: number) => `0190a3c4-5b6d-7e8f-9a0b-${String(i).padStart(12, '0')}`;
    const batch = Array.from({ length: 300 }, (_, i) => event(`resent-${i % 7}`, 'imported', { uuid: uuid(i), timestamp: '2020-01-02T03:04:05Z' }));
    const send = (body: object) => post(`${h.url}/batch/`, JSON.stringify({ api_key: KEY, historical_migration: true, ...body }));
    const before = await h.metric('spate_ingest_publish_duplicates_total');
    expect((await send({ batch })).status).toBe(200);
    expect((await send({ batch, sent_at: new Date().toISOString() })).status).toBe(200);
    const stored = (await h.events('historical')).filter((e) => e.distinct_id.startsWith('resent-'));
    expect(stored.map((e) => e.uuid).sort()).toEqual(batch.map((_, i) => uuid(i)).sort());
    expect(await h.metric('spate_ingest_publish_duplicates_total')).toBeGreaterThan(before);
    // The same events under other uuids are other events: stored.
    expect((await send({ batch: batch.map((e, i) => ({ ...e, uuid: uuid(1000 + i) })) })).status).toBe(200);
    expect((await h.events('historical')).filter((e) => e.distinct_id.startsWith('resent-')).length).toBe(600);
  });

  it('capture - a hot distinct_id past its burst is diverted to OVERFLOW, others stay on EVENTS', async () => {
    // Rate 10/s, burst 20: the first two requests spend the burst; a request is let through while
    // a token is left (charged in full, into debt) and diverted while the id is in debt.
    for (let i = 0; i < 5; i++) {
      const batch = Array.from({ length: 10 }, (_, j) => event('hot-user', `hot${i * 10 + j}`));
      batch.push(event(`calm-${i}`));
      expect((await post(`${h.url}/batch/`, JSON.stringify({ api_key: KEY, batch }))).status).toBe(200);
    }
    const overflow = await h.messages('overflow');
    const hot = overflow.flatMap((m) => m.events).filter((e) => e.distinct_id === 'hot-user');
    expect(hot.length).toBeGreaterThanOrEqual(10);
    for (const m of overflow) expect(m.subject).toBe(subjectFor('overflow', 5, shardOf('hot-user', 16)));
    const realtimeHot = (await h.events('events')).filter((e) => e.distinct_id === 'hot-user');
    expect(realtimeHot.slice(0, 20).map((e) => e.event)).toEqual(Array.from({ length: 20 }, (_, j) => `hot${j}`));
    expect(realtimeHot.length + hot.length).toBe(50);
    expect((await h.events('events')).filter((e) => e.distinct_id.startsWith('calm-'))).toHaveLength(5);
  });

  it('capture - a key added to the registry is accepted within a second; a removed one refused within a second', async () => {
    const body = JSON.stringify({ api_key: 'phc_new_project', ...event('n') });
    expect((await post(`${h.url}/capture/`, body)).status).toBe(401);
    const added = Date.now();
    await h.kv.put('phc_new_project', JSON.stringify({ projectId: 77, organizationId: 'o' }));
    await waitFor('key accepted', async () => (await post(`${h.url}/capture/`, body)).status === 200, 1_000, 20);
    expect(Date.now() - added).toBeLessThan(1_000);
    const removed = Date.now();
    await h.kv.delete('phc_new_project');
    await waitFor('key refused', async () => (await post(`${h.url}/capture/`, body)).status === 401, 1_000, 20);
    expect(Date.now() - removed).toBeLessThan(1_000);
    // A large body (parsed in a thread) sees the same registry.
    const big = JSON.stringify({ api_key: 'phc_new_project', batch: Array.from({ length: 500 }, (_, i) => event(`b${i}`, 'e', { properties: { pad: 'x'.repeat(100) } })) });
    expect((await post(`${h.url}/batch/`, big)).status).toBe(401);
  });

  it('capture - NUL characters and lone surrogates in any string are stored as U+FFFD (PostgreSQL refuses them)', async () => {
    const body = `{"api_key":"${KEY}","event":"e\\u0000v","distinct_id":"nul-user","properties":{"a\\u0000":"x\\ud800y","list":["\\udc00"]},"$set":{"n":"\\u0000"}}`;
    expect((await post(`${h.url}/capture/`, body)).status).toBe(200);
    const stored = (await h.events('events')).find((e) => e.distinct_id === 'nul-user')!;
    expect(stored.event).toBe('e\ufffdv');
    expect(stored.properties).toEqual({ 'a\ufffd': 'x\ufffdy', list: ['\ufffd'] });
    expect(stored.$set).toEqual({ n: '\ufffd' });
  });

  it('capture - /_health, /_ready and /metrics', async () => {
    expect((await fetch(`${h.url}/_health`)).status).toBe(200);
    const ready = await fetch(`${h.url}/_ready`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toMatchObject({ ready: true, checks: { nats: true, streams: true, registry: true } });
    const metrics = await (await fetch(`${h.url}/metrics`)).text();
    for (const name of ['spate_ingest_events_dropped_total', 'spate_ingest_parse_queue_depth', 'spate_ingest_inflight_bytes']) {
      expect(metrics).toContain(name);
    }
  });

  it('capture - metrics move with traffic: requests, events accepted, bytes in, publish latency', async () => {
    // prom-client prints metrics nobody touched too: only values that move show they are counted.
    const read = async () => ({
      requests: await h.metric('spate_ingest_requests_total', { route: 'batch', status: '200' }),
      accepted: await h.metric('spate_ingest_events_accepted_total', { stream: 'events' }),
      bytesIn: await h.metric('spate_ingest_bytes_in_total'),
      publishes: await h.metric('spate_ingest_publish_seconds_count'),
      dropped: await h.metric('spate_ingest_events_dropped_total'),
    });
    const before = await read();
    const batch = Array.from({ length: 7 }, (_, i) => event(`metrics-${i}`));
    batch.push({ event: 'no distinct id' } as unknown as ReturnType<typeof event>);
    const body = JSON.stringify({ api_key: KEY, batch });
    expect((await post(`${h.url}/batch/`, body)).status).toBe(200);
    const after = await read();
    expect(after.requests - before.requests).toBe(1);
    expect(after.accepted - before.accepted).toBe(7);
    expect(after.bytesIn - before.bytesIn).toBe(Buffer.byteLength(body));
    expect(after.publishes).toBeGreaterThan(before.publishes);
    expect(after.dropped - before.dropped).toBe(1);
  });

  it('capture - X-Forwarded-For is ignored unless TRUST_PROXY is set: ip is the socket peer', async () => {
    const body = JSON.stringify({ api_key: KEY, ...event('xff-ignored') });
    expect((await post(`${h.url}/capture/`, body, { 'x-forwarded-for': '203.0.113.7, 10.0.0.1' })).status).toBe(200);
    const stored = (await h.events('events')).filter((e) => e.distinct_id === 'xff-ignored');
    expect(stored).toHaveLength(1);
    expect(stored[0]!.ip).toBe('127.0.0.1');
  });

  it('capture - GET with a 64 KB URL (?data= base64 of a batch) is stored when its head arrives in one piece', async () => {
    const batch = Array.from({ length: 100 }, (_, i) => event('long-get', `g${i}`, { properties: { pad: 'x'.repeat(400) } }));
    const data = Buffer.from(JSON.stringify({ api_key: KEY, batch })).toString('base64');
    const path = `/e/?data=${encodeURIComponent(data)}`;
    expect(path.length).toBeGreaterThan(60_000);
    expect(path.length).toBeLessThan(64 * 1024);
    const res = await rawHead(h.url, `GET ${path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`, [Number.POSITIVE_INFINITY]);
    expect(res).toMatch(/^HTTP\/1\.1 200 /);
    expect((await h.events('events')).filter((e) => e.distinct_id === 'long-get')).toHaveLength(100);
  });

  it('capture - a head that arrives in several reads is served up to HTTP_MAX_HEADER_BYTES, past it 431 (docs/capture-api.md)', async () => {
    // uWS 20.30, which served capture before, closed such a connection once the head passed 4 KiB.
    const data = Buffer.from(JSON.stringify({ api_key: KEY, ...event('split-get', 'e', { properties: { pad: 'x'.repeat(4000) } }) })).toString('base64');
    const head = `GET /e/?data=${encodeURIComponent(data)} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`;
    expect(await rawHead(h.url, head, [1000, 1000, 1000, 1000, 1000, 1000])).toMatch(/^HTTP\/1\.1 200 /);
    const short = Buffer.from(JSON.stringify({ api_key: KEY, ...event('split-get-short') })).toString('base64');
    expect(await rawHead(h.url, `GET /e/?data=${encodeURIComponent(short)} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`, [50, 50])).toMatch(/^HTTP\/1\.1 200 /);
    expect((await h.events('events')).filter((e) => e.distinct_id.startsWith('split-get'))).toHaveLength(2);
    const tooLong = `GET /e/?data=${'A'.repeat(70 * 1024)} HTTP/1.1\r\nHost: x\r\n\r\n`;
    expect(await rawHead(h.url, tooLong, [30_000, 30_000])).toMatch(/^HTTP\/1\.1 431 [\s\S]*"code":"headers_too_large"/);
  });
});

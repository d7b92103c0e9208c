// Per-project limits end to end: set through a real admin server, carried to a real ingest node by
// the spate-projects KV bucket, enforced there: a project over its rate gets 429 while another
// on the same node keeps getting 200; a used-up daily quota drops events with 200; a project's
// historical message rate is held.
import { jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseSubject, STREAMS, type NatsConnection, type StreamKind } from '../lib/index.js';
import { startAdminFixture, type AdminFixture, type TestUser } from '../test/admin/harness.js';
import { silentLog } from '../test/ingest-harness.js';
import { waitFor } from '../test/kit/index.js';
import { loadIngestConfig, startIngest, type IngestNode } from './index.js';

let f: AdminFixture;
let owner: TestUser;
let node: IngestNode;
let nc: NatsConnection;
let jsm: JetStreamManager;

beforeAll(async () => {
  f = await startAdminFixture();
  owner = await f.newUser('owner@limits.example');
  node = await startIngest(loadIngestConfig({ ...f.nats.env('ingest'), CAPTURE_PORT: '0', PARSE_THREADS: '1' }), { log: silentLog });
  nc = await f.nats.connect('project-limits-test');
  jsm = await jetstreamManager(nc);
}, 60_000);
afterAll(async () => {
  await node?.stop();
  await nc?.close();
  await f?.stop();
});

/** A new project of the owner's organization with these limits, once the ingest node accepts its key. */
async function project(name: string, limits: Record<string, number> = {}): Promise<{ id: number; token: string }> {
  const created = await f.api('POST', `/api/organizations/${owner.organizationId}/projects/`, { key: owner.key, body: { name, ...limits } });
  expect(created.status).toBe(201);
  const token = created.body.api_token as string;
  // The key reaches the node through KV; until then capture answers 401.
  await waitFor(`key of ${name}`, async () => (await capture(token, 'probe', [])).status !== 401, 5_000, 20);
  return { id: created.body.id as number, token };
}

/** One request of `events` events (none: an empty batch, answered 400, to probe the key). */
function capture(token: string, distinctPrefix: string, events: number[], historical = false): Promise<Response> {
  const batch = events.map((i) => ({ event: 'limited', distinct_id: `${distinctPrefix}-${i}`, properties: {} }));
  return fetch(`${node.url}/batch/`, { method: 'POST', body: JSON.stringify({ api_key: token, historical_migration: historical, batch }) });
}

/** Events stored for the project in one stream. */
async function stored(kind: StreamKind, projectId: number): Promise<number> {
  const info = await jsm.streams.info(STREAMS[kind]);
  let events = 0;
  for (let seq = info.state.first_seq; info.state.messages > 0 && seq <= info.state.last_seq; seq++) {
    const m = await jsm.streams.getMessage(STREAMS[kind], { seq });
    if (m && parseSubject(m.subject)?.projectId === projectId) events += Number(m.header?.get('Spate-Events'));
  }
  return events;
}

async function metric(limit: string, projectId: number): Promise<number> {
  const text = await (await fetch(`${node.url}/metrics`)).text();
  const line = text
    .split('\n')
    .find((l) => l.startsWith('spate_ingest_project_limited_events_total{') && l.includes(`project="${projectId}"`) && l.includes(`limit="${limit}"`));
  return line ? Number(line.split(' ').at(-1)) : 0;
}

describe('per-project limits', () => {
  it('project limits - a project over its events per second gets 429 with Retry-After; another project on the node keeps getting 200', async () => {
    const slow = await project('Slow', { capture_events_per_second: 20 });
    const free = await project('Free');
    const answers = { slow: [] as number[], free: [] as number[] };
    let retryAfter: string | null = null;
    let refused: { code?: string; detail?: string } = {};
    // 5 events a request: 4 requests a second's worth, so even a loaded host sends faster than the refill.
    const five = [1, 2, 3, 4, 5];
    const started = performance.now();
    for (let i = 0; i < 40; i++) {
      const [s, g] = await Promise.all([capture(slow.token, `s${i}`, five), capture(free.token, `f${i}`, five)]);
      answers.slow.push(s.status);
      answers.free.push(g.status);
      if (s.status === 429) {
        retryAfter = s.headers.get('retry-after');
        refused = (await s.json()) as typeof refused;
      }
    }
    const seconds = (performance.now() - started) / 1000;
    expect(answers.free.every((s) => s === 200)).toBe(true);
    const accepted = answers.slow.filter((s) => s === 200).length;
    expect(answers.slow.filter((s) => s === 429).length).toBe(40 - accepted);
    // 20 events/s, 5 events a request: a second's worth (4 requests), plus the refill while they ran
    // (4 a second; one more for the request that passes on the last token and goes into debt).
    expect(accepted).toBeGreaterThanOrEqual(4);
    expect(accepted).toBeLessThanOrEqual(4 + Math.ceil(4 * seconds) + 1);
    expect(accepted).toBeLessThan(40);
    expect(retryAfter).toBe('1');
    expect(refused).toMatchObject({ code: 'rate_limited', detail: 'rate limit exceeded: this project may send 20 events per second to this ingest node' });
    // Only what was answered 200 is stored; the refusals are counted.
    expect(await stored('events', slow.id)).toBe(5 * accepted);
    expect(await stored('events', free.id)).toBe(200);
    expect(await metric('events_per_second', slow.id)).toBe(5 * (40 - accepted));

    // After Retry-After, it is let in again; a limit raised through the admin API applies within a second.
    await new Promise((r) => setTimeout(r, 1_000));
    expect((await capture(slow.token, 'later', [1, 2])).status).toBe(200);
    expect((await f.api('PATCH', `/api/projects/${slow.id}/`, { key: owner.key, body: { capture_events_per_second: 100_000 } })).status).toBe(200);
    await waitFor('raised limit applied', async () => (await capture(slow.token, 'raised', [1])).status === 200, 1_000, 10);
    for (let i = 0; i < 20; i++) expect((await capture(slow.token, `r${i}`, [1, 2, 3])).status).toBe(200);
  });

  it('project limits - past its daily quota a project’s events are dropped and still answered 200 (PostHog’s quota answer)', async () => {
    const quota = await project('Quota', { capture_events_per_day: 30 });
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++) statuses.push((await capture(quota.token, `q${i}`, Array.from({ length: 10 }, (_, j) => j))).status);
    expect(statuses).toEqual([200, 200, 200, 200, 200]);
    expect(await stored('events', quota.id)).toBe(30);
    expect(await metric('events_per_day', quota.id)).toBe(20);
    // Historical events count against the same quota.
    expect((await capture(quota.token, 'h', [1, 2, 3], true)).status).toBe(200);
    expect(await stored('historical', quota.id)).toBe(0);
  });

  it('project limits - historical messages per second hold a project’s imports, which go on after Retry-After', async () => {
    const importer = await project('Importer', { historical_messages_per_second: 4 });
    const other = await project('Other importer');
    // 64 distinct ids reach all 16 shards: one HISTORICAL message each, 16 per request.
    const batch = Array.from({ length: 64 }, (_, i) => i);
    expect((await capture(importer.token, 'a', batch, true)).status).toBe(200);
    const second = await capture(importer.token, 'b', batch, true);
    expect(second.status).toBe(429);
    expect(((await second.json()) as { detail: string }).detail).toBe('rate limit exceeded: this project may send 4 historical messages per second to this ingest node');
    // 16 messages at 4/s: 3 s of debt before a token is back.
    const wait = Number(second.headers.get('retry-after'));
    expect(wait).toBeGreaterThanOrEqual(3);
    expect(wait).toBeLessThanOrEqual(4);
    for (let i = 0; i < 3; i++) expect((await capture(other.token, `o${i}`, batch, true)).status).toBe(200);
    expect(await stored('historical', importer.id)).toBe(64);
    expect(await stored('historical', other.id)).toBe(3 * 64);
    expect(await metric('historical_messages_per_second', importer.id)).toBe(64);
    // Realtime events of the project are not held by the historical limit.
    expect((await capture(importer.token, 'rt', [1, 2, 3])).status).toBe(200);

    await new Promise((r) => setTimeout(r, wait * 1_000));
    expect((await capture(importer.token, 'b', batch, true)).status).toBe(200);
    expect(await stored('historical', importer.id)).toBe(128);
  }, 20_000);
});

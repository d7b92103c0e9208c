// Outages of the worker's dependencies: processing pauses and resumes, nothing lost or doubled.
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import type { CapturedEvent, NatsConnection } from '../lib/index.js';
import { startNats, startPostgres, startTcpProxy, waitFor } from '../test/kit/index.js';
import { capture, connectAndCreateStreams, publishEvents, readProcessed, waitForCommitted, workerConfig, testDeps } from '../test/workers/harness.js';
import { startWorker } from './index.js';

function events(projectId: number, from: number, count: number, ids: number): CapturedEvent[] {
  const out: CapturedEvent[] = [];
  for (let i = from; i < from + count; i++) {
    const kind = i % 10;
    const id = `u-${i % ids}`;
    if (kind === 0) out.push(capture(projectId, '$identify', id, { $set: { n: i } }));
    else if (kind === 1) out.push(capture(projectId, '$groupidentify', id, { $group_type: 'org', $group_key: `o${i % 5}`, $group_set: { n: i } }));
    else out.push(capture(projectId, 'clicked', id, { i }));
  }
  return out;
}

async function expectExactlyOnce(nc: NatsConnection, sent: CapturedEvent[], timeoutMs = 90_000): Promise<void> {
  let lines = await readProcessed(nc);
  await waitFor('every event processed', async () => (lines = await readProcessed(nc)).length >= sent.length, timeoutMs, 250);
  await new Promise((r) => setTimeout(r, 500));
  lines = await readProcessed(nc);
  const uuids = lines.map((l) => l.uuid);
  expect(new Set(uuids).size).toBe(uuids.length);
  expect(new Set(uuids)).toEqual(new Set(sent.map((e) => e.uuid)));
}

function counter(text: string, name: string, label: string): number {
  const m = new RegExp(`${name}\\{[^}]*${label}[^}]*\\} (\\d+)`).exec(text);
  return m ? Number(m[1]) : 0;
}

describe('worker resilience', () => {
  it('postgres restart - processing pauses and resumes with nothing lost or processed twice', async () => {
    await using nats = await startNats();
    await using postgres = await startPostgres();
    const databaseUrl = await postgres.createDatabase();
    const { nc, js } = await connectAndCreateStreams(nats.url);
    const worker = await startWorker(workerConfig(nats.url, databaseUrl, { WORKER_BATCH_MAX_EVENTS: '500' }), testDeps());
    try {
      const first = events(7, 0, 20_000, 300);
      await publishEvents(js, first, { perMessage: 25 });
      await waitFor('processing under way', async () => (await readProcessed(nc)).length > 0, 20_000, 50);
      await postgres.server.restart();
      const second = events(7, 20_000, 2_000, 300);
      await publishEvents(js, second, { perMessage: 25 });
      await expectExactlyOnce(nc, [...first, ...second]);

      const metrics = await worker.metrics.registry.metrics();
      expect(counter(metrics, 'spate_worker_batch_retries_total', 'reason="unavailable"')).toBeGreaterThan(0);
      const db = new pg.Client({ connectionString: databaseUrl });
      await db.connect();
      await waitForCommitted(db, [...first, ...second]);
      const { rows } = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM persons WHERE project_id = 7');
      expect(rows[0]!.n).toBe(300);
      const { rows: last } = await db.query<{ n: number }>(
        "SELECT (properties->>'n')::int AS n FROM persons p JOIN person_distinct_ids d ON d.person_uuid = p.uuid WHERE d.distinct_id = 'u-0'",
      );
      // u-0's last $identify is event 21_900 (i % 300 === 0 and i % 10 === 0).
      expect(last[0]!.n).toBe(21_900);
      await db.end();
    } finally {
      await worker.stop();
      await nc.close();
    }
  });

  it('large messages - a message bigger than the fetch budget is still delivered and processed', async () => {
    await using nats = await startNats();
    await using postgres = await startPostgres();
    const databaseUrl = await postgres.createDatabase();
    const { nc, js } = await connectAndCreateStreams(nats.url);
    const worker = await startWorker(workerConfig(nats.url, databaseUrl, { WORKER_FETCH_MAX_BYTES: '16KiB', WORKER_BATCH_MAX_BYTES: '32KiB' }), testDeps());
    try {
      const padding = 'x'.repeat(1_000);
      const big = Array.from({ length: 3_000 }, (_, i) => capture(11, 'big', 'one-user', { i, padding }));
      // One message of ~3 MB (all events share a distinct id, so one subject), then small ones.
      await publishEvents(js, big, { perMessage: 3_000 });
      const small = events(11, 0, 200, 10);
      await publishEvents(js, small, { perMessage: 5 });
      await expectExactlyOnce(nc, [...big, ...small]);
    } finally {
      await worker.stop();
      await nc.close();
    }
  });

  it('lost in flight - messages NATS sent just before the connection was cut are fetched again', async () => {
    // What a server dropping a slow consumer (or a network cut) does: messages it already sent
    // never arrive, and with no acks it never sends them again. nats.js resumes pulling without
    // noticing, so a shard with nothing more to come would wait forever; the stall probe finds
    // the messages in the stream and reopens the shard's consumer.
    await using nats = await startNats();
    await using proxy = await startTcpProxy(nats.url);
    await using postgres = await startPostgres();
    const databaseUrl = await postgres.createDatabase();
    const { nc, js } = await connectAndCreateStreams(nats.url);
    const worker = await startWorker(workerConfig(proxy.url, databaseUrl), testDeps());
    try {
      const first = events(13, 0, 320, 40);
      await publishEvents(js, first, { perMessage: 10 });
      await expectExactlyOnce(nc, first);
      proxy.hold();
      const second = events(13, 320, 1_600, 40);
      await publishEvents(js, second, { perMessage: 10 });
      // The server sends all of it into the held connection (the shards' pulls have room).
      await new Promise((r) => setTimeout(r, 500));
      proxy.cut();
      await expectExactlyOnce(nc, [...first, ...second], 60_000);
      const metrics = await worker.metrics.registry.metrics();
      expect(counter(metrics, 'spate_worker_feed_restarts_total', 'stream="EVENTS"')).toBeGreaterThan(0);
    } finally {
      await worker.stop();
      await nc.close();
    }
  });

  it('nats restart - the worker reconnects and resumes without being restarted', async () => {
    await using nats = await startNats();
    await using postgres = await startPostgres();
    const databaseUrl = await postgres.createDatabase();
    let { nc, js } = await connectAndCreateStreams(nats.url);
    const worker = await startWorker(workerConfig(nats.url, databaseUrl), testDeps());
    try {
      const first = events(8, 0, 3_000, 100);
      await publishEvents(js, first);
      await waitFor('processing under way', async () => (await readProcessed(nc)).length > 0, 20_000, 50);
      await nc.close();
      await nats.restart();
      ({ nc, js } = await connectAndCreateStreams(nats.url));
      const second = events(8, 3_000, 3_000, 100);
      await publishEvents(js, second);
      await expectExactlyOnce(nc, [...first, ...second]);
      await waitFor('the worker to own its shards again', () => worker.ownedShards().length === 16, 20_000, 100);
    } finally {
      await worker.stop();
      await nc.close();
    }
  });
});

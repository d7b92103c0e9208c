import { jetstreamManager } from '@nats-io/jetstream';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { DEFAULT_STREAM_LAYOUT, ensureStreams, streamsPresent, STREAMS } from '../../lib/index.js';
import { freshDatabase, startNats, startNatsCluster } from './index.js';

const limits = { replicas: 1, duplicateWindowMs: 120_000, maxAgeMs: 0, maxBytes: -1 };

describe('test kit', () => {
  it('kit - starts a JetStream server where the four streams can be created idempotently', async () => {
    await using nats = await startNats();
    const nc = await nats.connect('kit-test');
    const jsm = await jetstreamManager(nc);
    await ensureStreams(jsm, limits, DEFAULT_STREAM_LAYOUT);
    await ensureStreams(jsm, { ...limits, duplicateWindowMs: 60_000 }, DEFAULT_STREAM_LAYOUT);
    expect(await streamsPresent(jsm, DEFAULT_STREAM_LAYOUT)).toBe(true);
    const info = await jsm.streams.info(STREAMS.events);
    expect(info.config.duplicate_window).toBe(60_000 * 1_000_000);
    await ensureStreams(jsm, { ...limits, processedDuplicateWindowMs: 3_600_000 }, DEFAULT_STREAM_LAYOUT);
    expect((await jsm.streams.info(STREAMS.processed)).config.duplicate_window).toBe(3_600_000 * 1_000_000);
    expect((await jsm.streams.info(STREAMS.events)).config.duplicate_window).toBe(120_000 * 1_000_000);
    expect(nc.info?.max_payload).toBe(8 * 1024 * 1024);
    await nc.close();
  });

  it('kit - keeps stream data across a kill -9 and restart', async () => {
    await using nats = await startNats();
    let nc = await nats.connect('kit-test');
    await ensureStreams(await jetstreamManager(nc), limits, DEFAULT_STREAM_LAYOUT);
    const { jetstream } = await import('@nats-io/jetstream');
    await jetstream(nc).publish('events.1.0', 'hello');
    await nc.close();
    await nats.kill();
    await nats.restart();
    nc = await nats.connect('kit-test');
    const info = await (await jetstreamManager(nc)).streams.info(STREAMS.events);
    expect(info.state.messages).toBe(1);
    await nc.close();
  });

  it('kit - a 3-node cluster takes R3 streams', async () => {
    await using cluster = await startNatsCluster(3);
    const nc = await cluster.connect('kit-test');
    const jsm = await jetstreamManager(nc);
    await ensureStreams(jsm, { ...limits, replicas: 3 }, DEFAULT_STREAM_LAYOUT);
    const info = await jsm.streams.info(STREAMS.events);
    expect(info.config.num_replicas).toBe(3);
    expect(info.cluster?.replicas?.length).toBe(2);
    await nc.close();
  });

  it('kit - gives each test file its own PostgreSQL database', async () => {
    const a = await freshDatabase();
    const b = await freshDatabase();
    expect(a).not.toBe(b);
    const client = new pg.Client({ connectionString: a });
    await client.connect();
    const { rows } = await client.query('select current_database() as db');
    expect(a.endsWith(rows[0].db)).toBe(true);
    await client.end();
  });
});

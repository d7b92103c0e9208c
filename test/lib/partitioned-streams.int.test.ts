// STREAM_PARTITIONS against real servers: a 3-node JetStream cluster (streams at R3) with the
// capture streams split in three, a real ingest node taking HTTP requests and two workers; a
// process configured with another K refused; K = 1 keeping the single streams' names.
import { jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { describe, expect, it } from 'vitest';
import { StreamSizes } from '../../admin/live/index.js';
import { loadIngestConfig, startIngest, type IngestNode } from '../../ingest/index.js';
import {
  allStreamNames,
  ClusterSettingsMismatch,
  parseNdjson,
  parseSubject,
  PROJECTS_BUCKET,
  readClusterSettings,
  streamLayout,
  streamNamesOf,
  streamOfShard,
  type CapturedEvent,
  type StreamKind,
} from '../../lib/index.js';
import { startWorker, type Worker } from '../../workers/index.js';
import { silentLog } from '../ingest-harness.js';
import { freshDatabase, startNats, startNatsCluster, waitFor, type NatsCredentials } from '../kit/index.js';
import { testDeps, waitForProcessed, workerConfig } from '../workers/harness.js';

const KEY = 'phc_partitions';
const PROJECT = 7;

function ingestConfig(nats: NatsCredentials, env: Record<string, string>) {
  return loadIngestConfig({ ...nats.env('ingest'), CAPTURE_PORT: '0', PARSE_THREADS: '1', ...env });
}

/** Every message of a stream: its subject and events. */
async function storedIn(jsm: JetStreamManager, stream: string): Promise<{ subject: string; events: CapturedEvent[] }[]> {
  const { state } = await jsm.streams.info(stream);
  const out: { subject: string; events: CapturedEvent[] }[] = [];
  for (let seq = state.first_seq; state.messages > 0 && seq <= state.last_seq; seq++) {
    const m = await jsm.streams.getMessage(stream, { seq });
    if (m) out.push({ subject: m.subject, events: parseNdjson<CapturedEvent>(m.data) });
  }
  return out;
}

async function batch(node: IngestNode, events: object[], historical = false): Promise<void> {
  const res = await fetch(`${node.url}/batch/`, { method: 'POST', body: JSON.stringify({ api_key: KEY, batch: events, ...(historical ? { historical_migration: true } : {}) }) });
  expect(res.status).toBe(200);
}

describe('partitioned streams', () => {
  it('streams - K = 3 on a 3-node cluster: each event lands in the stream of its shard range and is processed once, in order per distinct id', { timeout: 240_000 }, async () => {
    await using cluster = await startNatsCluster(3);
    const nc = await cluster.connect('partitions-test');
    const workers: Worker[] = [];
    let node: IngestNode | undefined;
    try {
      await (await new Kvm(nc).create(PROJECTS_BUCKET, { history: 1, replicas: 3 })).put(KEY, JSON.stringify({ projectId: PROJECT, organizationId: 'org' }));
      const env = { NATS_URL: cluster.urls, STREAM_PARTITIONS: '3', STREAM_REPLICAS: '3', STREAM_LEADER_SPREAD_INTERVAL: '2s' };
      node = await startIngest(ingestConfig(cluster, env), { log: silentLog });
      const layout = streamLayout(16, 3);
      const jsm = await jetstreamManager(nc);
      for (const name of allStreamNames(layout)) expect((await jsm.streams.info(name)).config.num_replicas, name).toBe(3);
      expect(await readClusterSettings(nc)).toMatchObject({ shardCount: 16, streamPartitions: 3 });

      // Leaders: each kind's three partitions led from the three nodes once the node has started,
      // and again after a step-down crowds two on one node.
      const leaders = async (kind: StreamKind) => Promise.all(streamNamesOf(kind, layout).map(async (name) => (await jsm.streams.info(name)).cluster?.leader));
      for (const kind of ['events', 'historical', 'overflow'] as StreamKind[]) expect(new Set(await leaders(kind)).size, kind).toBe(3);
      await waitFor('two EVENTS leaders on one node', async () => {
        await nc.request('$JS.API.STREAM.LEADER.STEPDOWN.EVENTS_0', '', { timeout: 5_000 });
        await waitFor('EVENTS_0 led', async () => (await jsm.streams.info('EVENTS_0').catch(() => undefined))?.cluster?.leader !== undefined);
        return new Set(await leaders('events')).size < 3;
      });
      await waitFor('EVENTS leaders spread again', async () => new Set(await leaders('events').catch(() => [])).size === 3, 30_000, 250);

      const databaseUrl = await freshDatabase();
      for (let i = 0; i < 2; i++) {
        workers.push(await startWorker(workerConfig(cluster.urls, databaseUrl, { STREAM_PARTITIONS: '3', NATS_REPLICAS: '3', WORKER_BATCH_MAX_EVENTS: '200' }), testDeps()));
      }

      // 40 distinct ids (over every shard), each with a counter; requests one after the other, so
      // each id's events are sent in counter order. Every tenth request is a historical import.
      const ids = Array.from({ length: 40 }, (_, i) => `user-${i}`);
      const next = new Map<string, number>();
      let sent = 0;
      for (let r = 0; r < 40; r++) {
        const events = Array.from({ length: 60 }, (_, i) => {
          const id = ids[(r * 7 + i) % ids.length]!;
          const n = next.get(id) ?? 0;
          next.set(id, n + 1);
          return { event: 'step', distinct_id: id, properties: { n } };
        });
        await batch(node, events, r % 10 === 9);
        sent += events.length;
      }

      // Stored: every message in the stream its shard's range names, nothing anywhere else.
      let stored = 0;
      for (const kind of ['events', 'historical', 'overflow'] as StreamKind[]) {
        for (const name of streamNamesOf(kind, layout)) {
          for (const m of await storedIn(jsm, name)) {
            const subject = parseSubject(m.subject)!;
            expect(streamOfShard(kind, subject.shard, layout), m.subject).toBe(name);
            stored += m.events.length;
          }
        }
      }
      expect(stored).toBe(sent);
      expect((await jsm.streams.info('EVENTS_0')).state.messages).toBeGreaterThan(0);
      expect((await jsm.streams.info('EVENTS_2')).state.messages).toBeGreaterThan(0);

      // Processed: each event once, each id's realtime and historical events in counter order.
      const lines = await waitForProcessed(nc, sent, 120_000);
      expect(lines).toHaveLength(sent);
      expect(new Set(lines.map((l) => l.uuid)).size).toBe(sent);
      const historicalN = new Set<string>();
      for (const m of (await Promise.all(streamNamesOf('historical', layout).map((name) => storedIn(jsm, name)))).flat()) {
        for (const e of m.events) historicalN.add(`${e.distinct_id}/${String(e.properties.n)}`);
      }
      for (const id of ids) {
        const ofId = lines.filter((l) => l.distinct_id === id);
        for (const historical of [false, true]) {
          const ns = ofId.filter((l) => historicalN.has(`${id}/${String(l.properties.n)}`) === historical).map((l) => l.properties.n as number);
          expect(ns, `${id} ${historical ? 'historical' : 'realtime'}`).toEqual([...ns].sort((a, b) => a - b));
        }
      }
      expect(workers.every((w) => w.ownedShards().length > 0)).toBe(true);

      // The admin server's live page sizes every partition, as the admin user, from the recorded K.
      const admin = await cluster.connect('partitions-admin', 'admin');
      try {
        const sizes = await new StreamSizes(admin, await jetstreamManager(admin)).read();
        expect(sizes.map((s) => s.name)).toEqual(allStreamNames(layout));
        const events = sizes.filter((s) => s.name.startsWith('EVENTS_') || s.name.startsWith('HISTORICAL_')).map((s) => s.messages!);
        expect(events.reduce((a, b) => a + b, 0)).toBeGreaterThan(0);
        expect(sizes.find((s) => s.name === 'PROCESSED')?.messages).toBeGreaterThan(0);
      } finally {
        await admin.close();
      }

      // A process configured with another K is refused, the running ones unaffected.
      const refused: unknown = await startIngest(ingestConfig(cluster, { ...env, STREAM_PARTITIONS: '1' }), { log: silentLog }).catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(ClusterSettingsMismatch);
      expect(String(refused)).toContain('created with 3 stream partitions but STREAM_PARTITIONS is 1');
      const worker: unknown = await startWorker(workerConfig(cluster.urls, databaseUrl, { STREAM_PARTITIONS: '2', NATS_REPLICAS: '3' }), testDeps()).catch((e: unknown) => e);
      expect(worker).toBeInstanceOf(ClusterSettingsMismatch);
      await waitFor('capture still ready', async () => (await fetch(`${node!.url}/_ready`)).ok);
    } finally {
      for (const w of workers) await w.stop();
      await node?.stop();
      await nc.close();
    }
  });

  it('streams - capture goes on through stream leader elections: every request answered 200, every event stored once', { timeout: 120_000 }, async () => {
    await using cluster = await startNatsCluster(3);
    const nc = await cluster.connect('elections-test');
    let node: IngestNode | undefined;
    try {
      await (await new Kvm(nc).create(PROJECTS_BUCKET, { history: 1, replicas: 3 })).put(KEY, JSON.stringify({ projectId: PROJECT, organizationId: 'org' }));
      node = await startIngest(ingestConfig(cluster, { NATS_URL: cluster.urls, STREAM_REPLICAS: '3' }), { log: silentLog });
      const jsm = await jetstreamManager(nc);
      const leader = async () => (await jsm.streams.info('EVENTS').catch(() => undefined))?.cluster?.leader;
      await waitFor('EVENTS led, replicas current', async () => {
        const info = await jsm.streams.info('EVENTS');
        return info.cluster?.leader !== undefined && (info.cluster.replicas ?? []).every((r) => r.current);
      });

      // Four clients send single events one after another while EVENTS' leader steps down five
      // times; a publish during an election fails at once ("no responders") and is retried.
      let sending = true;
      const statuses = new Map<number, number>();
      let sent = 0;
      const client = async (c: number) => {
        for (let i = 0; sending; i++) {
          const res = await fetch(`${node!.url}/capture/`, { method: 'POST', body: JSON.stringify({ api_key: KEY, event: 'e', distinct_id: `c${c}-${i}`, properties: { i } }) });
          statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
          await res.arrayBuffer();
          sent++;
        }
      };
      const clients = [0, 1, 2, 3].map(client);
      for (let i = 0; i < 5; i++) {
        const before = await leader();
        await nc.request('$JS.API.STREAM.LEADER.STEPDOWN.EVENTS', '', { timeout: 5_000 });
        await waitFor('a new EVENTS leader', async () => {
          const now = await leader();
          return now !== undefined && now !== before;
        });
        await new Promise((r) => setTimeout(r, 300));
      }
      sending = false;
      await Promise.all(clients);

      expect(Object.fromEntries(statuses)).toEqual({ 200: sent });
      // A distinct id per event, so none turns hot and moves to OVERFLOW; both are counted anyway.
      let stored = 0;
      for (const stream of ['EVENTS', 'OVERFLOW']) stored += (await storedIn(jsm, stream)).reduce((n, m) => n + m.events.length, 0);
      expect(stored).toBe(sent);
    } finally {
      await node?.stop();
      await nc.close();
    }
  });

  it('streams - K = 1 (the default) keeps the single streams EVENTS, HISTORICAL, OVERFLOW and PROCESSED', async () => {
    await using nats = await startNats();
    const nc = await nats.connect('partitions-default');
    try {
      await (await new Kvm(nc).create(PROJECTS_BUCKET, { history: 1 })).put(KEY, JSON.stringify({ projectId: PROJECT, organizationId: 'org' }));
      const node = await startIngest(ingestConfig(nats, {}), { log: silentLog });
      try {
        await batch(node, [{ event: 'e', distinct_id: 'a' }]);
        const jsm = await jetstreamManager(nc);
        const names: string[] = [];
        for await (const name of jsm.streams.names()) if (!name.startsWith('KV_')) names.push(name);
        expect(names.sort()).toEqual(['EVENTS', 'HISTORICAL', 'OVERFLOW', 'PROCESSED']);
        expect((await jsm.streams.info('EVENTS')).config.subjects).toEqual(['events.>']);
        expect((await jsm.streams.info('EVENTS')).state.messages).toBe(1);
        expect(await readClusterSettings(nc)).toMatchObject({ shardCount: 16, streamPartitions: 1 });
      } finally {
        await node.stop();
      }
    } finally {
      await nc.close();
    }
  });
});

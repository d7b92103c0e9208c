// deploy/nats/auth.conf against a real nats-server (the test kit runs every server with it): no
// connection without credentials, and each role's user can do what that role does and nothing
// that would let it read another's secrets or destroy data.
import { connect as tcpConnect } from 'node:net';
import { AckPolicy, jetstream, jetstreamManager, type JetStreamManager, type MsgRequest } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  BATCH_EXPORTS_BUCKET,
  connectNats,
  ensurePipelineStreams,
  createLogger,
  DEFAULT_STREAM_LAYOUT,
  ensureClusterSettings,
  ensureStreams,
  MAX_STREAM_PARTITIONS,
  NatsAuthError,
  PIPELINE_STREAMS,
  PLUGIN_CONFIGS_BUCKET,
  PLUGIN_SOURCES_BUCKET,
  PROJECTS_BUCKET,
  readClusterSettings,
  streamLayout,
  streamNamesOf,
  type NatsConnection,
} from '../../lib/index.js';
import { startNats, startNatsCluster, type NatsHandle } from '../../test/kit/index.js';

let nats: NatsHandle;
let operator: NatsConnection;
let jsm: JetStreamManager;
const open: NatsConnection[] = [];

async function as(role: 'ingest' | 'worker' | 'admin'): Promise<NatsConnection> {
  const nc = await nats.connect(`auth-test-${role}`, role);
  open.push(nc);
  return nc;
}

/** The error a promise rejects with (fails the test if it resolves). */
async function refusal(p: Promise<unknown>): Promise<Error> {
  return p.then(
    () => {
      throw new Error('expected a refusal');
    },
    (err: unknown) => err as Error,
  );
}

const PERMISSION = /Permissions Violation/;

/** What the server says to a subscription: nats.js ends a refused one with the error. */
async function subscribing(nc: NatsConnection, subject: string): Promise<string> {
  const sub = nc.subscribe(subject);
  const ended = await Promise.race([sub.closed, new Promise((r) => setTimeout(() => r('still open'), 2_000))]);
  return ended instanceof Error ? ended.message : String(ended);
}

beforeAll(async () => {
  nats = await startNats();
  operator = await nats.connect('auth-test-operator');
  jsm = await jetstreamManager(operator);
  await ensureStreams(jsm, { replicas: 1, duplicateWindowMs: 60_000, maxAgeMs: 0, maxBytes: -1 }, DEFAULT_STREAM_LAYOUT);
  await ensurePipelineStreams(jsm, { replicas: 1, maxBytes: -1, requestMaxAgeMs: 0, duplicateWindowMs: 60_000 });
  const kvm = new Kvm(operator);
  await (await kvm.create(BATCH_EXPORTS_BUCKET, { history: 1 })).put('export-1', JSON.stringify({ destination: { type: 'S3', config: { aws_secret_access_key: 'not-for-ingest' } } }));
  await (await kvm.create(PLUGIN_CONFIGS_BUCKET, { history: 1 })).put('1', JSON.stringify({ configs: [{ config: { apiKey: 'not-for-ingest' } }] }));
  await (await kvm.create(PLUGIN_SOURCES_BUCKET, { history: 1 })).put('c0de', 'exports.processEvent = (e) => e');
  await (await kvm.create(PROJECTS_BUCKET, { history: 1 })).put('phc_auth', JSON.stringify({ projectId: 1, organizationId: 'o' }));
  await jetstream(operator).publish('events.1.0', '{"uuid":"u"}\n');
});

afterAll(async () => {
  for (const nc of open) await nc.close();
  await operator?.close();
  await nats?.stop();
});

describe('nats authorization', () => {
  it('nats auth - a connection without credentials, or with a wrong password, is refused', async () => {
    const anonymous = await refusal(connectNats(nats.url, 'anonymous'));
    expect(anonymous).toBeInstanceOf(NatsAuthError);
    expect(anonymous.message).toContain('refused no credentials');
    const wrong = await refusal(connectNats(nats.url, 'wrong', { user: 'spate-ingest', pass: 'not-the-password' }));
    expect(wrong).toBeInstanceOf(NatsAuthError);
    expect(wrong.message).toContain('user spate-ingest');
  });

  it('nats auth - the ingest user cannot read spate-batch-exports, spate-plugin-configs or spate-plugin-sources (a real KV get fails with a permissions error)', async () => {
    const nc = await as('ingest');
    const kvm = new Kvm(nc);
    for (const bucket of [BATCH_EXPORTS_BUCKET, PLUGIN_CONFIGS_BUCKET, PLUGIN_SOURCES_BUCKET]) {
      const kv = await kvm.open(bucket);
      const err = await refusal(kv.get(bucket === BATCH_EXPORTS_BUCKET ? 'export-1' : bucket === PLUGIN_CONFIGS_BUCKET ? '1' : 'c0de'));
      expect(err.message, bucket).toMatch(PERMISSION);
      expect(err.message, bucket).toContain(`KV_${bucket}`);
      // Nor by watching the bucket, nor by listening to its subjects as the admin server writes them.
      expect((await refusal(kv.watch())).message, bucket).toMatch(PERMISSION);
    }
    expect(await subscribing(nc, `$KV.${BATCH_EXPORTS_BUCKET}.>`)).toMatch(/Permissions Violation for Subscription/);
  });

  it('nats auth - the ingest user cannot purge or delete streams, write project keys, or read other roles\' replies', async () => {
    const nc = await as('ingest');
    const ingestJsm = await jetstreamManager(nc);
    expect((await refusal(ingestJsm.streams.purge('EVENTS'))).message).toMatch(PERMISSION);
    expect((await refusal(ingestJsm.streams.delete('EVENTS'))).message).toMatch(PERMISSION);
    expect((await refusal(ingestJsm.streams.delete(`KV_${PROJECTS_BUCKET}`))).message).toMatch(PERMISSION);
    const projects = await new Kvm(nc).open(PROJECTS_BUCKET);
    expect((await refusal(projects.put('phc_forged', JSON.stringify({ projectId: 2, organizationId: 'x' })))).message).toMatch(PERMISSION);
    for (const inbox of ['_INBOX.>', '_INBOX_admin.>', '_INBOX_worker.>', '>']) {
      expect(await subscribing(nc, inbox), inbox).toMatch(/Permissions Violation for Subscription/);
    }
    expect((await jsm.streams.info('EVENTS')).state.messages).toBe(1);
    // What ingest does is allowed: it reads project keys and publishes events.
    expect((await projects.get('phc_auth'))?.json()).toEqual({ projectId: 1, organizationId: 'o' });
    expect((await jetstream(nc).publish('events.1.1', '{"uuid":"v"}\n')).stream).toBe('EVENTS');
  });

  it('nats auth - the worker user reads the pipeline buckets and streams the export runner and plugins need, and changes nothing it does not own', async () => {
    const nc = await as('worker');
    const js = jetstream(nc);
    const workerJsm = await jetstreamManager(nc);
    const kvm = new Kvm(nc);
    expect((await (await kvm.open(BATCH_EXPORTS_BUCKET)).get('export-1'))?.json()).toMatchObject({ destination: { type: 'S3' } });
    expect((await (await kvm.open(PLUGIN_CONFIGS_BUCKET)).get('1'))?.json()).toMatchObject({ configs: [{ config: { apiKey: 'not-for-ingest' } }] });
    expect((await (await kvm.open(PLUGIN_SOURCES_BUCKET)).get('c0de'))?.string()).toBe('exports.processEvent = (e) => e');
    // Only the admin server writes them.
    expect((await refusal((await kvm.open(BATCH_EXPORTS_BUCKET)).put('export-1', '{}'))).message).toMatch(PERMISSION);
    expect((await refusal((await kvm.open(PLUGIN_SOURCES_BUCKET)).put('c0de', 'forged'))).message).toMatch(PERMISSION);

    // Requests from the admin server: consumed with durable consumers and acknowledged.
    for (const stream of [PIPELINE_STREAMS.batchExportBackfills, PIPELINE_STREAMS.pluginJobs]) {
      await jetstream(operator).publish(`${stream.prefix}.1.7`, '{"id":"r1"}\n');
      await workerJsm.consumers.add(stream.name, { durable_name: 'auth-test', ack_policy: AckPolicy.Explicit });
      const msg = await (await js.consumers.get(stream.name, 'auth-test')).next({ expires: 5_000 });
      expect(msg?.string(), stream.name).toBe('{"id":"r1"}\n');
      expect(await msg!.ackAck(), stream.name).toBe(true);
    }
    // PROCESSED: a plugin destination's durable consumer.
    await jetstream(operator).publish('processed.1.0', '{"uuid":"p"}\n');
    await workerJsm.consumers.add('PROCESSED', { durable_name: 'plugin-destination-1', ack_policy: AckPolicy.Explicit, filter_subject: 'processed.1.>' });
    const processed = await (await js.consumers.get('PROCESSED', 'plugin-destination-1')).next({ expires: 5_000 });
    expect(await processed!.ackAck()).toBe(true);
    await workerJsm.consumers.delete('PROCESSED', 'plugin-destination-1');
    // Reports to the admin server.
    for (const stream of [PIPELINE_STREAMS.pluginLogs, PIPELINE_STREAMS.batchExportRuns, PIPELINE_STREAMS.batchExportLogs]) {
      expect((await js.publish(`${stream.prefix}.1.7`, '{"message":"hi"}\n')).stream).toBe(stream.name);
    }
    // Nothing it does not own.
    expect((await refusal(workerJsm.streams.purge('EVENTS'))).message).toMatch(PERMISSION);
    expect((await refusal(workerJsm.streams.delete('PROCESSED'))).message).toMatch(PERMISSION);
    expect((await refusal(js.publish('events.1.0', 'forged'))).message).toMatch(PERMISSION);
    expect((await refusal(js.publish(`${PIPELINE_STREAMS.pluginJobs.prefix}.1.7`, 'forged'))).message).toMatch(PERMISSION);
    expect((await refusal((await kvm.open(PROJECTS_BUCKET)).get('phc_auth'))).message).toMatch(PERMISSION);
  });

  it('nats auth - the admin user reads no event stream and cannot purge or delete streams', async () => {
    const nc = await as('admin');
    const adminJsm = await jetstreamManager(nc);
    // Their sizes, for the live page, and nothing more.
    expect((await adminJsm.streams.info('EVENTS')).state.messages).toBeGreaterThanOrEqual(0);
    expect((await refusal(adminJsm.consumers.add('EVENTS', { durable_name: 'peek', ack_policy: AckPolicy.None }))).message).toMatch(PERMISSION);
    expect((await refusal(adminJsm.streams.getMessage('EVENTS', { seq: 1 }))).message).toMatch(PERMISSION);
    expect((await refusal(adminJsm.streams.purge(PIPELINE_STREAMS.pluginLogs.name))).message).toMatch(PERMISSION);
    expect((await refusal(adminJsm.streams.delete(`KV_${BATCH_EXPORTS_BUCKET}`))).message).toMatch(PERMISSION);
    expect((await (await new Kvm(nc).open(BATCH_EXPORTS_BUCKET)).get('export-1'))?.json()).toMatchObject({ destination: { type: 'S3' } });
  });
});

describe('nats authorization, partitioned streams', () => {
  it('nats auth - with STREAM_PARTITIONS at its maximum, each role does on EVENTS_<p> … what it does on the single streams, and no more', async () => {
    await using server = await startNats();
    const ingest = await server.connect('auth-partitions-ingest', 'ingest');
    const worker = await server.connect('auth-partitions-worker', 'worker');
    const admin = await server.connect('auth-partitions-admin', 'admin');
    open.push(ingest, worker, admin);
    const layout = streamLayout(64, MAX_STREAM_PARTITIONS);
    const last = `EVENTS_${MAX_STREAM_PARTITIONS - 1}`;
    // Ingest: records the settings, creates every stream, publishes.
    await ensureClusterSettings(ingest, { shardCount: 64, streamPartitions: MAX_STREAM_PARTITIONS }, 1, createLogger('auth-test', 'silent'));
    await ensureStreams(await jetstreamManager(ingest), { replicas: 1, duplicateWindowMs: 60_000, maxAgeMs: 0, maxBytes: -1 }, layout);
    expect((await jetstream(ingest).publish('events.1.63', '{"uuid":"a"}\n')).stream).toBe(last);
    expect((await jetstream(ingest).publish('historical.1.0', '{"uuid":"b"}\n')).stream).toBe('HISTORICAL_0');
    expect((await refusal((await jetstreamManager(ingest)).streams.purge(last))).message).toMatch(PERMISSION);
    // Worker: reads a shard in order, probes it, and cannot write or purge it.
    const workerJsm = await jetstreamManager(worker);
    const consumer = await jetstream(worker).consumers.get(last, { filter_subjects: 'events.*.63' });
    expect((await consumer.next({ expires: 5_000 }))?.string()).toBe('{"uuid":"a"}\n');
    await consumer.delete();
    const probe = { seq: 1, next_by_subj: 'events.*.63' } as unknown as MsgRequest;
    expect((await workerJsm.streams.getMessage(last, probe))?.seq).toBe(1);
    expect((await workerJsm.streams.info('OVERFLOW_0')).config.subjects).toEqual(['overflow.*.0', 'overflow.*.1', 'overflow.*.2', 'overflow.*.3']);
    expect((await refusal(workerJsm.streams.purge(last))).message).toMatch(PERMISSION);
    expect((await refusal(jetstream(worker).publish('events.1.63', 'forged'))).message).toMatch(PERMISSION);
    // Admin: learns the partitions, sizes every stream, reads no message.
    const adminJsm = await jetstreamManager(admin);
    expect(await readClusterSettings(admin)).toMatchObject({ streamPartitions: MAX_STREAM_PARTITIONS });
    for (const name of streamNamesOf('historical', layout)) expect((await adminJsm.streams.info(name)).config.name).toBe(name);
    expect((await refusal(adminJsm.streams.getMessage(last, { seq: 1 }))).message).toMatch(PERMISSION);
    expect((await refusal(adminJsm.consumers.add(last, { durable_name: 'peek', ack_policy: AckPolicy.None }))).message).toMatch(PERMISSION);
  });
});

describe('nats cluster routes', () => {
  it('nats auth - a route connection to a cluster node without the route credentials is refused', async () => {
    await using cluster = await startNatsCluster(3);
    const routePort = cluster.nodes[0]!.options.cluster!.port;
    const answer = await new Promise<string>((resolve, reject) => {
      const socket = tcpConnect(routePort, '127.0.0.1');
      let text = '';
      socket.on('data', (d: Buffer) => {
        text += d.toString();
        if (text.startsWith('INFO') && !text.includes('CONNECT_SENT')) {
          text += 'CONNECT_SENT';
          socket.write('CONNECT {"verbose":false,"pedantic":false,"name":"rogue","cluster":"spate-test"}\r\nPING\r\n');
        }
        if (/-ERR/.test(text)) {
          socket.destroy();
          resolve(text);
        }
      });
      socket.on('error', reject);
      socket.on('close', () => resolve(text));
    });
    expect(answer).toMatch(/-ERR 'Authorization Violation'/);
    // The nodes themselves are routed to each other (their URLs carry the route credentials).
    // nats-server 2.10 opens a pool of connections to each peer: count the peers.
    const routez = (await (await fetch(`${cluster.nodes[0]!.monitorUrl}/routez`)).json()) as { routes: { remote_id: string }[] };
    expect(new Set(routez.routes.map((r) => r.remote_id)).size).toBe(2);
  });
});

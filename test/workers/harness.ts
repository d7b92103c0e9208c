// Test helpers for workers: streams on a real nats-server, captured events published the way the
// ingest node does (NDJSON, Nats-Msg-Id, Spate-Events, subject by shard), PROCESSED read back.
import { spawn, type ChildProcess } from 'node:child_process';
import type pg from 'pg';
import { jetstream, jetstreamManager, type JetStreamClient } from '@nats-io/jetstream';
import { headers } from '@nats-io/transport-node';
import {
  createLogger,
  DEFAULT_STREAM_LAYOUT,
  ensureStreams,
  parseNdjson,
  runtimeModule,
  shardOf,
  STREAMS,
  subjectFor,
  toNdjson,
  uuidv7,
  type CapturedEvent,
  type NatsConnection,
  type ProcessedEvent,
  type StreamKind,
} from '../../lib/index.js';
import { loadWorkerConfig, type WorkerConfig, type WorkerDeps } from '../../workers/index.js';
import { freePort, TEST_SECRET_KEY, testNats } from '../kit/index.js';

export const STREAM_LIMITS = { replicas: 1, duplicateWindowMs: 120_000, maxAgeMs: 0, maxBytes: -1 };

/** An operator connection to the test nats-server at `url`, with the event streams created. */
export async function connectAndCreateStreams(url: string): Promise<{ nc: NatsConnection; js: JetStreamClient }> {
  const nc = await testNats(url).connect('workers-test');
  await ensureStreams(await jetstreamManager(nc), STREAM_LIMITS, DEFAULT_STREAM_LAYOUT);
  return { nc, js: jetstream(nc) };
}

export function workerConfig(natsUrl: string, databaseUrl: string, env: Record<string, string> = {}): WorkerConfig {
  return loadWorkerConfig({
    ...testNats(natsUrl).env('worker'),
    SPATE_SECRET_KEY: TEST_SECRET_KEY,
    DATABASE_URL: databaseUrl,
    WORKER_LEASE_TTL: '3s',
    WORKER_DB_POOL_SIZE: '6',
    ...env,
  });
}

/** In-process workers log warnings only (WORKER_TEST_LOG_LEVEL=debug to see everything). */
export function testDeps(extra: WorkerDeps = {}): WorkerDeps {
  return { logger: createLogger('worker', process.env.WORKER_TEST_LOG_LEVEL ?? 'warn'), ...extra };
}

/** Env for a worker child process. */
export function workerEnv(natsUrl: string, databaseUrl: string, env: Record<string, string> = {}): Record<string, string> {
  return {
    ...(process.env as Record<string, string>),
    ...testNats(natsUrl).env('worker'),
    SPATE_SECRET_KEY: TEST_SECRET_KEY,
    DATABASE_URL: databaseUrl,
    WORKER_LEASE_TTL: '3s',
    WORKER_DB_POOL_SIZE: '6',
    LOG_LEVEL: process.env.WORKER_TEST_LOG_LEVEL ?? 'warn',
    ...env,
  };
}

let clock = Date.parse('2024-05-01T12:00:00.000Z');

export function capture(
  projectId: number,
  event: string,
  distinctId: string,
  properties: Record<string, unknown> = {},
  extra: Partial<CapturedEvent> = {},
): CapturedEvent {
  clock += 1000;
  const at = new Date(clock).toISOString();
  return {
    uuid: uuidv7(),
    event,
    distinct_id: distinctId,
    properties,
    timestamp: at,
    now: at,
    token: `phc_test_${projectId}`,
    project_id: projectId,
    ...extra,
  };
}

let messageCounter = 0;

/**
 * Publishes events as ingest does: grouped by shard of distinct_id (order kept within a shard),
 * `perMessage` events per NDJSON message.
 */
export async function publishEvents(
  js: JetStreamClient,
  events: readonly CapturedEvent[],
  options: { shardCount?: number; perMessage?: number; kind?: StreamKind } = {},
): Promise<void> {
  const shardCount = options.shardCount ?? 16;
  const perMessage = options.perMessage ?? 50;
  const kind = options.kind ?? 'events';
  const groups = new Map<string, CapturedEvent[]>();
  for (const e of events) {
    const subject = subjectFor(kind, e.project_id, shardOf(e.distinct_id, shardCount));
    let list = groups.get(subject);
    if (!list) groups.set(subject, (list = []));
    list.push(e);
  }
  const pending: Promise<unknown>[] = [];
  for (const [subject, list] of groups) {
    for (let i = 0; i < list.length; i += perMessage) {
      const chunk = list.slice(i, i + perMessage);
      const h = headers();
      h.set('Spate-Events', String(chunk.length));
      pending.push(js.publish(subject, toNdjson(chunk), { msgID: `test-${process.pid}-${++messageCounter}`, headers: h }));
      if (pending.length >= 500) await Promise.all(pending.splice(0));
    }
  }
  await Promise.all(pending);
}

export interface ProcessedLine extends ProcessedEvent {
  subject: string;
  msgId: string;
}

/** Every event on PROCESSED so far (reads the stream from its start). */
export async function readProcessed(nc: NatsConnection): Promise<ProcessedLine[]> {
  const jsm = await jetstreamManager(nc);
  const info = await jsm.streams.info(STREAMS.processed);
  const last = info.state.last_seq;
  const out: ProcessedLine[] = [];
  if (info.state.messages === 0) return out;
  const consumer = await jetstream(nc).consumers.get(STREAMS.processed);
  const messages = await consumer.consume({ max_messages: 1000 });
  for await (const m of messages) {
    const msgId = m.headers?.get('Nats-Msg-Id') ?? '';
    for (const line of parseNdjson<ProcessedEvent>(m.data)) out.push({ ...line, subject: m.subject, msgId });
    if (m.seq >= last) break;
  }
  await messages.close();
  return out;
}

/** Waits until PROCESSED holds at least `count` events, then returns them. */
export async function waitForProcessed(nc: NatsConnection, count: number, timeoutMs = 30_000): Promise<ProcessedLine[]> {
  const deadline = Date.now() + timeoutMs;
  let lines: ProcessedLine[] = [];
  while (Date.now() < deadline) {
    lines = await readProcessed(nc);
    if (lines.length >= count) return lines;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`timed out waiting for ${count} processed events (have ${lines.length})`);
}

/**
 * Waits until every one of `events` is committed to Postgres. A worker publishes a batch to
 * PROCESSED before it commits (a replay re-publishes under the same ids), so a line on PROCESSED
 * does not yet mean its person writes are visible; the batch's dedup rows commit with them.
 */
export async function waitForCommitted(db: pg.Pool | pg.ClientBase, events: readonly CapturedEvent[], timeoutMs = 30_000): Promise<void> {
  const keys = new Map(events.map((e) => [`${e.project_id}:${e.uuid}`, e]));
  const projects = [...keys.values()].map((e) => e.project_id);
  const uuids = [...keys.values()].map((e) => e.uuid);
  const deadline = Date.now() + timeoutMs;
  let committed = 0;
  while (Date.now() < deadline) {
    const { rows } = await db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM event_dedup d
       JOIN unnest($1::int[], $2::uuid[]) AS i(project_id, uuid) ON d.project_id = i.project_id AND d.uuid = i.uuid`,
      [projects, uuids],
    );
    committed = rows[0]!.n;
    if (committed >= keys.size) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out waiting for ${keys.size} events to commit (have ${committed})`);
}

export function byUuid(lines: readonly ProcessedLine[]): Map<string, ProcessedLine> {
  return new Map(lines.map((l) => [l.uuid, l]));
}

export interface WorkerProcess {
  id: string;
  child: ChildProcess;
  /** stdout + stderr so far (pino JSON lines). */
  output(): string;
  /** Base URL of its status server, once it logged it. */
  statusUrl(): Promise<string>;
  /** Shards the worker reports on /_ready. */
  shards(): Promise<number[] | undefined>;
  exited: Promise<number | null>;
  kill(signal?: NodeJS.Signals): void;
}

/** Worker processes a test starts with one environment, all killed (-9) when it ends (`await using`). */
export function workerProcesses(env: Record<string, string>): AsyncDisposable & { spawn(id: string): Promise<WorkerProcess> } {
  const started: WorkerProcess[] = [];
  return {
    async spawn(id) {
      const w = await spawnWorker(id, env);
      started.push(w);
      return w;
    },
    async [Symbol.asyncDispose]() {
      for (const w of started) {
        w.kill('SIGKILL');
        await w.exited;
      }
    },
  };
}

/** Runs `workers/main` as a real child process (through tsx under tests). */
export async function spawnWorker(id: string, env: Record<string, string>): Promise<WorkerProcess> {
  const mod = runtimeModule(import.meta.url, '../../workers/main');
  const port = await freePort();
  const child = spawn(process.execPath, [...mod.execArgv, mod.path], {
    env: { ...env, WORKER_ID: id, WORKER_METRICS_PORT: String(port) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let text = '';
  child.stdout.on('data', (d: Buffer) => (text += d.toString()));
  child.stderr.on('data', (d: Buffer) => (text += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const statusUrl = async () => {
    const deadline = Date.now() + 60_000;
    while (Date.now() < deadline) {
      const url = `http://127.0.0.1:${port}`;
      if (await fetch(`${url}/_health`).then((r) => r.ok, () => false)) return url;
      if (child.exitCode !== null) throw new Error(`worker ${id} exited: ${text.slice(-2000)}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`worker ${id} did not start: ${text.slice(-2000)}`);
  };
  return {
    id,
    child,
    output: () => text,
    statusUrl,
    shards: async () => {
      const res = await fetch(`${await statusUrl()}/_ready`).catch(() => undefined);
      if (!res?.ok) return undefined;
      return ((await res.json()) as { shards: number[] }).shards;
    },
    exited,
    kill: (signal = 'SIGKILL') => child.kill(signal),
  };
}

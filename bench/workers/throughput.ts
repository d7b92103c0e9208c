// Benchmark: processing throughput and latency of ONE worker process with PostgreSQL.
//
//   npx tsx bench/workers/throughput.ts [--quick] [--events N] [--persons N] [--no-durable]
//   (or, built: node dist/bench/workers/throughput.js)
//
// Starts a private nats-server and PostgreSQL (deploy/local building blocks), preloads persons,
// publishes a realistic mix into EVENTS as ingest would (80% custom events of known persons, 10%
// $identify, 5% $create_alias, 5% $groupidentify; 100 events per message), then starts one worker
// process and measures:
//   1. throughput: events/s while it drains the backlog, over the whole drain (from a cold start:
//      JIT, heap growth and the person cache filling from PostgreSQL) and in steady state (between
//      30% and 90% of the backlog processed: what a worker that has been running sustains);
//   2. latency: with the backlog gone, events published at a fixed rate; per event, the time from
//      its source message being published to its PROCESSED message being stored (capture-independent).
// Prints one table and, run on its own, writes JSON to bench/results/; in the suite
// (`npm run bench`) its figures are a table of the suite's report and part of its JSON.
import { spawn } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { jetstream, jetstreamManager, type JetStreamClient } from '@nats-io/jetstream';
import { headers } from '@nats-io/transport-node';
import * as hdr from 'hdr-histogram-js';
import pg from 'pg';
import { generateNatsServerAuth, NatsNode } from '../../deploy/local/nats-server.js';
import { freePort } from '../../deploy/local/ports.js';
import { PostgresServer } from '../../deploy/local/postgres.js';
import { waitFor } from '../../deploy/local/wait.js';
import {
  connectNats,
  generateSecretKey,
  NATS_USERS,
  DEFAULT_STREAM_LAYOUT,
  ensureStreams,
  runtimeModule,
  shardOf,
  STREAMS,
  subjectFor,
  type CapturedEvent,
  type NatsConnection,
} from '../../lib/index.js';
import { personUuidFor } from '../../workers/index.js';
import { drainFigures, drainWindow, type DrainFigures, type DrainSample, type DrainWindow } from '../lib/drain-window.js';
import { cpuSeconds, machineCpuSeconds, postgresCpuSeconds } from '../lib/processes.js';
import type { Table } from '../lib/report.js';
import { MixGenerator, PROJECT } from '../lib/worker-mix.js';

export interface WorkerThroughputOptions {
  /** Events in the backlog drained for the throughput figure. */
  events: number;
  /** Known persons preloaded into Postgres. */
  persons: number;
  perMessage: number;
  shardCount: number;
  /** Seconds of fixed-rate publishing for the latency figure. */
  latencySeconds: number;
  /** Rate of the latency phase in events/s; default: half the measured throughput. */
  latencyRate?: number;
  /** PostgreSQL with fsync and synchronous commit (true) or without (false, like the tests). */
  durable: boolean;
  /** Write bench/results/workers-throughput-<time>.json (run on its own; the suite folds the result into its report). */
  writeResults: boolean;
  /** Write a V8 CPU profile of the worker process to bench/results/profiles/. */
  profile?: boolean;
  log: (line: string) => void;
  /** Aborting stops the waits (the suite's stage time limit); processes are stopped as on any failure. */
  signal?: AbortSignal;
}

export interface WorkerThroughputResult {
  name: 'workers-throughput';
  at: string;
  options: Omit<WorkerThroughputOptions, 'log' | 'signal'>;
  mix: Record<string, number>;
  /** The whole drain, from a cold start. */
  throughput: DrainFigures & {
    /**
     * The same figures between 30% and 90% of the backlog processed (the worker warmed up);
     * undefined for a backlog too small for that (--quick): 30% processed before the first sample,
     * or the window under STEADY_MIN_SECONDS, where the batches in flight at either end (their CPU
     * is spent before their events count as processed) would skew the figures.
     */
    steady: DrainWindow | undefined;
  };
  latency: { rate: number; events: number; p50Ms: number; p90Ms: number; p99Ms: number; maxMs: number };
  machine: { cpus: number; loadAverage: number[] };
  resultsFile?: string;
}

// Small enough for the suite's --quick (under a minute in all): a smoke test, not figures.
export const QUICK: Partial<WorkerThroughputOptions> = { events: 20_000, persons: 2_000, latencySeconds: 1 };

// A cold worker spends its first ~200k events of this mix warming up (measured 2026-11-24: ~70 µs
// of worker CPU per event over the first 250k, ~20 µs after), so the steady window needs a longer backlog.
const DEFAULTS: WorkerThroughputOptions = {
  events: 1_000_000,
  persons: 20_000,
  perMessage: 100,
  shardCount: 16,
  latencySeconds: 10,
  durable: true,
  writeResults: true,
  log: (line) => console.log(line),
};

/** Highest EVENTS sequence published per shard: the worker is done when its positions reach them. */
const lastSeqByShard = new Map<number, number>();
/** Per shard, the backlog's messages as [stream sequence, events]: positions say how many events are done. */
const publishedByShard = new Map<number, [number, number][]>();

const STEADY_MIN_SECONDS = 5;

function steadyWindow(samples: readonly DrainSample[], total: number): DrainWindow | undefined {
  // A small backlog (--quick) can be 30% processed before the first sample: no start to measure from.
  if (samples[0]!.processed > 0.3 * total) return undefined;
  const w = drainWindow(samples, total, 0.3, 0.9);
  return w.seconds >= STEADY_MIN_SECONDS ? w : undefined;
}

/** Events of the backlog whose messages are at or below their shard's committed position. */
function eventsUpTo(positions: Map<number, number>): number {
  let done = 0;
  for (const [shard, messages] of publishedByShard) {
    const at = positions.get(shard) ?? 0;
    for (const [seq, events] of messages) if (seq <= at) done += events;
  }
  return done;
}

async function publishMessages(
  js: JetStreamClient,
  events: CapturedEvent[],
  o: WorkerThroughputOptions,
  sentAt?: Map<string, number>,
): Promise<void> {
  const bySubject = new Map<string, CapturedEvent[]>();
  for (const e of events) {
    const subject = subjectFor('events', e.project_id, shardOf(e.distinct_id, o.shardCount));
    let list = bySubject.get(subject);
    if (!list) bySubject.set(subject, (list = []));
    list.push(e);
  }
  const pending: Promise<unknown>[] = [];
  for (const [subject, list] of bySubject) {
    for (let i = 0; i < list.length; i += o.perMessage) {
      const chunk = list.slice(i, i + o.perMessage);
      let body = '';
      for (const e of chunk) body += JSON.stringify(e) + '\n';
      const h = headers();
      h.set('Spate-Events', String(chunk.length));
      const at = Date.now();
      if (sentAt) for (const e of chunk) sentAt.set(e.uuid, at);
      const shard = Number(subject.split('.')[2]);
      pending.push(
        js.publish(subject, body, { headers: h, msgID: chunk[0]!.uuid }).then((ack) => {
          lastSeqByShard.set(shard, Math.max(lastSeqByShard.get(shard) ?? 0, ack.seq));
          let list = publishedByShard.get(shard);
          if (!list) publishedByShard.set(shard, (list = []));
          list.push([ack.seq, chunk.length]);
        }),
      );
      if (pending.length >= 256) await Promise.all(pending.splice(0));
    }
  }
  await Promise.all(pending);
}

async function preloadPersons(databaseUrl: string, persons: number): Promise<void> {
  const db = new pg.Client({ connectionString: databaseUrl });
  await db.connect();
  try {
    for (let from = 0; from < persons; from += 5_000) {
      const ids: string[] = [];
      for (let i = from; i < Math.min(persons, from + 5_000); i++) ids.push(`user-${i}`);
      const uuids = ids.map((d) => personUuidFor(PROJECT, d));
      const props = ids.map((d) => JSON.stringify({ email: `${d}@example.com`, name: d, plan: 'free', signup: '2024-01-01' }));
      await db.query(
        `INSERT INTO persons (uuid, project_id, properties, is_identified, created_at, version)
         SELECT u, $2, p, true, now(), 0 FROM unnest($1::uuid[], $3::jsonb[]) AS t(u, p)`,
        [uuids, PROJECT, props],
      );
      await db.query(
        `INSERT INTO person_distinct_ids (project_id, distinct_id, person_uuid) SELECT $2, d, u FROM unnest($1::text[], $3::uuid[]) AS t(d, u)`,
        [ids, PROJECT, uuids],
      );
    }
  } finally {
    await db.end();
  }
}

async function metricSum(url: string, name: string): Promise<number> {
  const text = await fetch(`${url}/metrics`).then((r) => r.text(), () => '');
  let sum = 0;
  for (const line of text.split('\n')) if (line.startsWith(name)) sum += Number(line.split(' ').pop());
  return sum;
}

/** Times from publish to PROCESSED storage for the events of `sentAt`, read from the stream after `fromSeq`. */
async function processedLatencies(nc: NatsConnection, fromSeq: number, sentAt: Map<string, number>): Promise<number[]> {
  const consumer = await jetstream(nc).consumers.get(STREAMS.processed, { opt_start_seq: fromSeq + 1 });
  const out: number[] = [];
  const decoder = new TextDecoder();
  const deadline = Date.now() + 120_000;
  for (;;) {
    const batch = await consumer.fetch({ max_messages: 100, expires: 2_000 });
    let got = 0;
    for await (const m of batch) {
      got++;
      const stored = m.info.timestampNanos / 1e6;
      for (const line of decoder.decode(m.data).split('\n')) {
        if (!line) continue;
        const at = sentAt.get((JSON.parse(line) as { uuid: string }).uuid);
        if (at !== undefined) out.push(Math.max(0, stored - at));
      }
    }
    if (got === 0 || out.length >= sentAt.size || Date.now() > deadline) break;
  }
  return out;
}

export async function runWorkerThroughput(options: Partial<WorkerThroughputOptions> = {}): Promise<WorkerThroughputResult> {
  const o: WorkerThroughputOptions = { ...DEFAULTS, ...options };
  lastSeqByShard.clear();
  publishedByShard.clear();
  const dir = mkdtempSync(join(tmpdir(), 'spate-bench-workers-'));
  chmodSync(dir, 0o711);
  const auth = generateNatsServerAuth();
  const nats = new NatsNode({ dir: join(dir, 'nats'), port: await freePort(), monitorPort: await freePort(), serverName: 'bench', auth });
  const postgres = new PostgresServer({ dataDir: join(dir, 'pg'), port: await freePort(), durable: o.durable });
  let child: ReturnType<typeof spawn> | undefined;
  let nc: NatsConnection | undefined;
  let db: pg.Client | undefined;
  try {
    await nats.start();
    await postgres.init();
    await postgres.start();
    const databaseUrl = await postgres.createDatabase('spate');
    nc = await connectNats(nats.url, 'bench-workers', { user: NATS_USERS.operator, pass: auth.passwords.operator });
    await ensureStreams(await jetstreamManager(nc), { replicas: 1, duplicateWindowMs: 120_000, maxAgeMs: 0, maxBytes: -1 }, DEFAULT_STREAM_LAYOUT);
    const js = jetstream(nc);

    // The worker creates its schema; start it once without shards' work to migrate, then preload.
    const { migrateWorkerSchema } = await import('../../workers/migrate.js');
    const { createLogger } = await import('../../lib/index.js');
    await migrateWorkerSchema(databaseUrl, createLogger('bench', 'warn'));
    o.log(`preloading ${o.persons} persons…`);
    await preloadPersons(databaseUrl, o.persons);

    const gen = new MixGenerator(o.persons);
    o.log(`publishing ${o.events} events (${o.perMessage} per message)…`);
    const backlog: CapturedEvent[] = [];
    for (let i = 0; i < o.events; i++) backlog.push(gen.next());
    for (let i = 0; i < backlog.length; i += 20_000) await publishMessages(js, backlog.slice(i, i + 20_000), o);
    const mix = { ...gen.mix };

    const mod = runtimeModule(import.meta.url, '../../workers/main');
    const port = await freePort();
    const output: string[] = [];
    const profileArgs = o.profile ? ['--cpu-prof', `--cpu-prof-dir=${join(resultsDirectory(), 'profiles')}`] : [];
    child = spawn(process.execPath, [...mod.execArgv, ...profileArgs, mod.path], {
      env: {
        ...process.env,
        NATS_URL: nats.url,
        NATS_USER: NATS_USERS.worker,
        NATS_PASSWORD: auth.passwords.worker,
        SPATE_SECRET_KEY: generateSecretKey(),
        DATABASE_URL: databaseUrl,
        SHARD_COUNT: String(o.shardCount),
        WORKER_METRICS_PORT: String(port),
        WORKER_ID: 'bench-worker',
        LOG_LEVEL: 'warn',
        SPATE_WORKER_TIMINGS: process.env.BENCH_DEBUG ?? '',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout!.on('data', (d: Buffer) => output.push(d.toString()));
    child.stderr!.on('data', (d: Buffer) => (process.env.BENCH_DEBUG ? process.stderr.write(d) : output.push(d.toString())));
    const statusUrl = `http://127.0.0.1:${port}`;
    // Progress from Postgres (positions), not /metrics: scraping costs the worker CPU it would otherwise measure.
    const progress = (db = new pg.Client({ connectionString: databaseUrl }));
    // Stopping PostgreSQL on a failure ends this connection: not an uncaught error.
    progress.on('error', () => undefined);
    await progress.connect();
    const positions = async () => {
      const { rows } = await progress.query<{ shard: number; position: string }>(
        "SELECT shard, position FROM shard_positions WHERE stream = 'EVENTS'",
      );
      return new Map(rows.map((r) => [r.shard, Number(r.position)]));
    };
    const caughtUpAt = (at: Map<number, number>) => [...lastSeqByShard].every(([shard, seq]) => (at.get(shard) ?? 0) >= seq);
    const caughtUp = async () => caughtUpAt(await positions());

    o.log('worker started: draining the backlog…');
    await waitFor('the worker to start', async () => [...(await positions()).values()].some((p) => p > 0), 120_000, 100, o.signal).catch((err: Error) => {
      throw new Error(`${err.message} (${output.join('').slice(-1000)})`, { cause: err });
    });
    const t0 = performance.now();
    const n0 = await metricSum(statusUrl, 'spate_worker_events_processed_total');
    const resumes0 = await metricSum(statusUrl, 'spate_worker_feed_resumes_total');
    const workerPid = child.pid;
    const sample = (at: Map<number, number>): DrainSample => ({
      t: performance.now(),
      processed: eventsUpTo(at),
      cpu: { worker: cpuSeconds(workerPid), postgres: postgresCpuSeconds(postgres.pid), nats: cpuSeconds(nats.pid) },
      machine: machineCpuSeconds(),
    });
    const samples: DrainSample[] = [sample(await positions())];
    const cpu0 = samples[0]!.cpu;
    await waitFor(
      'the backlog to drain',
      async () => {
        const at = await positions();
        samples.push(sample(at));
        return caughtUpAt(at);
      },
      30 * 60_000,
      250,
      o.signal,
    );
    const seconds = (performance.now() - t0) / 1000;
    if (process.env.BENCH_DEBUG) {
      const text = await fetch(`${statusUrl}/metrics`).then((r) => r.text());
      o.log(text.split('\n').filter((l) => /^spate_worker_(batch_duration_seconds_(sum|count)|batch_events_(sum|count)|batch_phase_seconds_sum|batch_retries|person_cache|publish_dup)/.test(l)).join('\n'));
    }
    const used = {
      worker: cpuSeconds(child.pid) - cpu0.worker,
      postgres: postgresCpuSeconds(postgres.pid) - cpu0.postgres,
      nats: cpuSeconds(nats.pid) - cpu0.nats,
    };
    const throughput = { ...drainFigures(o.events - n0, seconds, used), steady: steadyWindow(samples, o.events) };
    o.log(`throughput: ${throughput.eventsPerSecond} events/s (whole drain), ${throughput.steady?.eventsPerSecond ?? 'not measured'} events/s (steady)`);
    // One scrape after the drain: how often a pull ended short and a feed went on with a new consumer.
    o.log(`feed resumes during the drain: ${(await metricSum(statusUrl, 'spate_worker_feed_resumes_total')) - resumes0}`);

    // Latency at a fixed rate, in 100 ms ticks.
    const rate = o.latencyRate ?? Math.max(1_000, Math.round(throughput.eventsPerSecond / 2));
    const before = (await jetstreamManager(nc)).streams.info(STREAMS.processed);
    const fromSeq = (await before).state.last_seq;
    const sentAt = new Map<string, number>();
    const perTick = Math.max(1, Math.round(rate / 10));
    const ticks = o.latencySeconds * 10;
    const started = Date.now();
    for (let t = 0; t < ticks; t++) {
      o.signal?.throwIfAborted();
      const batch: CapturedEvent[] = [];
      for (let i = 0; i < perTick; i++) batch.push(gen.next());
      await publishMessages(js, batch, o, sentAt);
      const wait = started + (t + 1) * 100 - Date.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    }
    await waitFor('the latency phase to drain', caughtUp, 120_000, 100, o.signal);
    if (process.env.BENCH_DEBUG) {
      const text = await fetch(`${statusUrl}/metrics`).then((r) => r.text());
      o.log(text.split('\n').filter((l) => /^spate_worker_(batch_duration_seconds_(sum|count)|batch_events_(sum|count)|batch_phase_seconds_sum|batch_retries)/.test(l)).join('\n'));
    }
    await progress.end();
    db = undefined;
    const latencies = await processedLatencies(nc, fromSeq, sentAt);
    const h = hdr.build({ lowestDiscernibleValue: 1, highestTrackableValue: 3_600_000, numberOfSignificantValueDigits: 3 });
    for (const l of latencies) h.recordValue(Math.max(1, Math.round(l)));
    const latency = {
      rate,
      events: latencies.length,
      p50Ms: h.getValueAtPercentile(50),
      p90Ms: h.getValueAtPercentile(90),
      p99Ms: h.getValueAtPercentile(99),
      maxMs: h.maxValue,
    };

    const { cpus, loadavg } = await import('node:os');
    const { log: _log, signal: _signal, ...options } = o;
    const result: WorkerThroughputResult = {
      name: 'workers-throughput',
      at: new Date().toISOString(),
      options,
      mix,
      throughput,
      latency,
      machine: { cpus: cpus().length, loadAverage: loadavg() },
    };
    if (o.writeResults) {
      o.log(formatTable(result));
      const resultsDir = resultsDirectory();
      mkdirSync(resultsDir, { recursive: true });
      const file = join(resultsDir, `workers-throughput-${result.at.replace(/[:.]/g, '-')}.json`);
      writeFileSync(file, JSON.stringify(result, null, 2) + '\n');
      result.resultsFile = file;
      o.log(`results: ${file}`);
    }
    return result;
  } finally {
    await db?.end().catch(() => undefined);
    if (child && child.exitCode === null) {
      child.kill('SIGTERM');
      await new Promise((r) => child!.once('exit', r));
    }
    await nc?.close().catch(() => undefined);
    await nats.stop().catch(() => undefined);
    await postgres.stop().catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  }
}

/** bench/results/ of the source tree, also when running from dist/. */
function resultsDirectory(): string {
  return fileURLToPath(new URL('../results/', import.meta.url).href.replace('/dist/bench/', '/bench/'));
}

function tableRows(r: WorkerThroughputResult): [string, string][] {
  return [
    ['events (backlog)', String(r.throughput.events)],
    ['mix custom/identify/alias/groupidentify', `${r.mix.custom}/${r.mix.identify}/${r.mix.create_alias}/${r.mix.groupidentify}`],
    ['whole drain from a cold start, events/s', String(r.throughput.eventsPerSecond)],
    ['  CPU µs/event worker / postgres / nats', cpuText(r.throughput.cpu)],
    ...steadyRows(r.throughput.steady),
    ['latency phase rate, events/s', String(r.latency.rate)],
    ['latency p50 / p90 / p99 / max, ms', `${r.latency.p50Ms} / ${r.latency.p90Ms} / ${r.latency.p99Ms} / ${r.latency.maxMs}`],
    ['postgres durable (fsync, sync commit)', String(r.options.durable)],
    ['cpus / load average', `${r.machine.cpus} / ${r.machine.loadAverage.map((l) => l.toFixed(2)).join(' ')}`],
  ];
}

/** The figures as a table of the suite's report. */
export function workerThroughputTable(r: WorkerThroughputResult): Table {
  return {
    title: 'Worker throughput: one worker process with PostgreSQL (bench/workers)',
    note:
      `A backlog of ${r.throughput.events.toLocaleString('en-US')} captured events (the realistic mix: 80% custom events of ${r.options.persons.toLocaleString('en-US')} preloaded persons, 10% $identify, 5% $create_alias, 5% $groupidentify; ${r.options.perMessage} per message) drained by one worker; ` +
      'then events published at a fixed rate, latency from publish into EVENTS to storage in PROCESSED. One run; worker, PostgreSQL and nats-server share the cores.',
    columns: ['measure', 'value'],
    rows: tableRows(r),
  };
}

function steadyRows(w: DrainWindow | undefined): [string, string][] {
  if (!w) return [['steady state', `not measured (a drain this short has no 30–90% window of ${STEADY_MIN_SECONDS} s)`]];
  return [
    [`steady state (${percent(w.from)}–${percent(w.to)} drained), events/s`, String(w.eventsPerSecond)],
    ['  CPU µs/event worker / postgres / nats', cpuText(w.cpu)],
    ['  bound by worker CPU (1 core), events/s', String(w.workerCoreBoundEventsPerSecond)],
    ['  bound by all CPU on 2 cores, events/s', String(w.twoCoreBoundEventsPerSecond)],
    ['  machine CPU busy / idle on disk I/O', `${percent(w.machine.busy)} / ${percent(w.machine.iowait)}`],
  ];
}

const cpuText = (c: DrainWindow['cpu']) => `${c.workerUsPerEvent} / ${c.postgresUsPerEvent} / ${c.natsUsPerEvent}`;
const percent = (share: number) => `${Math.round(share * 100)}%`;

function formatTable(r: WorkerThroughputResult): string {
  const rows = tableRows(r);
  const width = Math.max(...rows.map(([k]) => k.length));
  return ['', 'workers throughput (provisional on a shared machine)', ...rows.map(([k, v]) => `  ${k.padEnd(width)}  ${v}`), ''].join('\n');
}

const USAGE = `usage: node dist/bench/workers/throughput.js [--quick] [--events N] [--persons N] [--latency-rate N] [--no-durable] [--profile]
  Drains a backlog of the realistic mix with one worker process and reports events/s, CPU per event and latency.`;

/** Command-line options; unknown ones are refused (a typo must not start a minutes-long run with defaults). */
function optionsFromArgs(argv: string[]): Partial<WorkerThroughputOptions> | undefined {
  const { values } = parseArgs({
    args: argv,
    options: {
      quick: { type: 'boolean' },
      events: { type: 'string' },
      persons: { type: 'string' },
      'latency-rate': { type: 'string' },
      'no-durable': { type: 'boolean' },
      profile: { type: 'boolean' },
      help: { type: 'boolean' },
    },
  });
  if (values.help) return undefined;
  const count = (option: string, text: string | undefined) => {
    if (text === undefined) return undefined;
    const n = Number(text);
    if (!(n > 0)) throw new Error(`--${option} must be a positive number (got ${JSON.stringify(text)})`);
    return n;
  };
  const out: Partial<WorkerThroughputOptions> = values.quick ? { ...QUICK } : {};
  const events = count('events', values.events);
  const persons = count('persons', values.persons);
  const rate = count('latency-rate', values['latency-rate']);
  if (events) out.events = events;
  if (persons) out.persons = persons;
  if (rate) out.latencyRate = rate;
  if (values['no-durable']) out.durable = false;
  if (values.profile) out.profile = true;
  return out;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  let options: Partial<WorkerThroughputOptions> | undefined;
  try {
    options = optionsFromArgs(process.argv.slice(2));
  } catch (err) {
    console.error(`${(err as Error).message}\n${USAGE}`);
    process.exit(2);
  }
  if (!options) {
    console.log(USAGE);
    process.exit(0);
  }
  runWorkerThroughput(options).then(
    () => process.exit(0),
    (err: unknown) => {
      console.error(err);
      process.exit(1);
    },
  );
}

// `npx tsx bench/exports/throughput.ts [--events N]` (and the `exports` stage of `npm run bench`):
// one batch-export run of an interval of N events (1M by default) from PROCESSED, timed by the
// runner's own run reports (Running → Completed), in a worker process apart from this one, to
//   - S3 (s3rver in this process, on loopback), JSONLines gzip;
//   - PostgreSQL (a database of the bench's own server), COPY.
// The worker's resident memory is sampled during each run: its peak above the idle worker is
// what a run of that size costs (the bound is stated in docs/exports.md).
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { AckPolicy, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { headers } from '@nats-io/transport-node';
import pg from 'pg';
import S3rver from 's3rver';
import {
  BATCH_EXPORTS_BUCKET,
  generateSecretKey,
  NATS_USERS,
  parseNdjson,
  pipelineSubject,
  runtimeModule,
  PIPELINE_STREAMS,
  shardOf,
  subjectFor,
  type BatchExportRecord,
  type BatchExportRunLine,
  type NatsConnection,
} from '../../lib/index.js';
import { freePort } from '../../deploy/local/ports.js';
import { waitFor } from '../../deploy/local/wait.js';
import { parseBenchArgs, usageError } from '../lib/cli.js';
import { startPipelineServers } from '../lib/pipeline-servers.js';
import { cpuSeconds, killOnExit, reapedChildrenCpuSeconds, rssBytes, sampleRss, threadCpuSeconds, withChildren, type BenchProcess } from '../lib/processes.js';
import { processedWebEvent } from '../lib/processed-event.js';
import { markdownTable, median, type Table } from '../lib/report.js';

/** The destinations of `--only`, by the names of their rows. */
const BENCH_DESTINATIONS = {
  s3: (name: string) => name === 'S3, JSONLines gzip',
  parquet: (name: string) => name.startsWith('S3, Parquet'),
  postgres: (name: string) => name.startsWith('PostgreSQL'),
};
type BenchDestination = keyof typeof BENCH_DESTINATIONS;

export interface ExportRunFigures {
  destination: string;
  /** Which worker build ran it (same-run A/B). */
  build: string;
  records: number;
  seconds: number;
  eventsPerSecond: number;
  bytes: number | null;
  /** Worker RSS before the run and at its peak during it, MiB. */
  idleRssMiB: number;
  peakRssMiB: number;
  /**
   * CPU per exported event (user + system, µs) from the backfill request to Completed, of the
   * worker, PostgreSQL (all its processes), nats-server and this process (s3rver runs in it): on a
   * shared machine the events/s follow the CPU left over, these do not.
   */
  cpuMicrosPerEvent?: { worker: number; postgres: number; nats: number; bench: number };
  /** The worker's CPU per event split: its main thread (the event loop, one core at most) and its other threads (zlib on libuv's pool, GC). */
  workerThreadsMicrosPerEvent?: { main: number; others: number };
}

export interface ExportThroughputResult {
  events: number;
  eventBytes: number;
  runs: ExportRunFigures[];
}

const MiB = 1024 * 1024;

/** CPU seconds so far of the worker, PostgreSQL (postmaster, its live and its ended backends), nats-server and this process. */
function cpuOf(worker: number, postmaster: number | undefined, nats: number | undefined) {
  const threads = threadCpuSeconds(worker);
  return {
    worker: cpuSeconds(worker),
    main: threads.main,
    others: threads.others,
    postgres: cpuSeconds(...withChildren(postmaster)) + reapedChildrenCpuSeconds(postmaster),
    nats: cpuSeconds(nats),
    bench: cpuSeconds(process.pid),
  };
}

/** PROCESSED lines as the persons role writes them: a realistic web event. */
function processedLine(i: number, hourStart: number): string {
  return JSON.stringify(processedWebEvent(i, new Date(hourStart + Math.floor((i * 3_600_000) / 1_000_000) % 3_600_000).toISOString(), new Date().toISOString(), 1));
}

async function publishProcessed(nc: NatsConnection, events: number, hourStart: number): Promise<number> {
  const js = jetstream(nc);
  const perMessage = 1_000;
  const pending: Promise<unknown>[] = [];
  let bytes = 0;
  for (let i = 0; i < events; i += perMessage) {
    const lines: string[] = [];
    for (let j = i; j < Math.min(events, i + perMessage); j++) lines.push(processedLine(j, hourStart));
    const body = lines.join('\n') + '\n';
    bytes += body.length;
    const h = headers();
    h.set('Spate-Events', String(lines.length));
    pending.push(js.publish(subjectFor('processed', 1, shardOf(`user-${i}`, 16)), body, { msgID: `bench-${i}`, headers: h }));
    if (pending.length >= 64) await Promise.all(pending.splice(0));
  }
  await Promise.all(pending);
  return bytes / events;
}

async function dropTable(url: URL, table: string): Promise<void> {
  const client = new pg.Client({ connectionString: url.toString() });
  await client.connect();
  try {
    await client.query(`DROP TABLE IF EXISTS ${pg.escapeIdentifier(table)}`);
    await client.query('DELETE FROM spate_batch_export_runs');
  } finally {
    await client.end();
  }
}

/** A worker build to run: this checkout, or another one's compiled `dist/` (same-run A/B). */
export interface WorkerBuild {
  label: string;
  /** A checkout whose `dist/workers/main.js` is run; undefined: this one. */
  root?: string;
}

export interface ExportThroughputOptions {
  events: number;
  log: (m: string) => void;
  signal?: AbortSignal;
  /** Runs of each destination per build, taken in turns (A, B, A, B …) so that load from others falls on each alike. */
  rounds?: number;
  builds?: WorkerBuild[];
  /** Destinations to run (s3, parquet, postgres); all by default. */
  only?: string[];
  /** Node options for the worker process (e.g. --cpu-prof, --perf-basic-prof). */
  workerNodeArgs?: string[];
}

function startWorker(build: WorkerBuild, env: NodeJS.ProcessEnv, nodeArgs: string[]): BenchProcess {
  const entry = build.root ? { path: join(build.root, 'dist/workers/main.js'), execArgv: [] } : runtimeModule(import.meta.url, '../../workers/main');
  const child = spawn(process.execPath, [...nodeArgs, ...entry.execArgv, entry.path], { env: { ...process.env, ...env }, stdio: ['ignore', 'ignore', 'inherit'] });
  killOnExit(child);
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  const signal = async (sig: NodeJS.Signals) => {
    if (child.exitCode === null && child.signalCode === null) child.kill(sig);
    await exited;
  };
  return { child, pid: child.pid!, stop: () => signal('SIGTERM'), kill: () => signal('SIGKILL') };
}

export async function runExportThroughput(o: ExportThroughputOptions): Promise<ExportThroughputResult> {
  const builds = o.builds ?? [{ label: 'this build' }];
  const rounds = o.rounds ?? 1;
  const servers = await startPipelineServers('bench-exports');
  const { dir, nats, auth, postgres, databaseUrl, nc } = servers;
  const s3 = new S3rver({ address: '127.0.0.1', port: await freePort(), silent: true, directory: join(dir, 's3'), configureBuckets: [{ name: 'bench', configs: [] }] });
  let worker: BenchProcess | undefined;
  try {
    const targetUrl = new URL(await postgres.createDatabase('export_target'));
    const s3Address = await s3.run();
    const kv = await new Kvm(nc).create(BATCH_EXPORTS_BUCKET, { history: 1 });

    const hourStart = Math.floor(Date.now() / 3_600_000) * 3_600_000 - 2 * 3_600_000;
    o.log(`publishing ${o.events.toLocaleString('en-US')} events to PROCESSED…`);
    const eventBytes = await publishProcessed(nc, o.events, hourStart);

    const workerEnv = (port: number, build: WorkerBuild) => ({
      NATS_URL: nats.url,
      NATS_USER: NATS_USERS.worker,
      NATS_PASSWORD: auth.passwords.worker,
      SPATE_SECRET_KEY: generateSecretKey(),
      DATABASE_URL: databaseUrl,
      WORKER_METRICS_PORT: String(port),
      WORKER_ID: `bench-exports-${build.label.replace(/\W+/g, '-')}`,
      EXPORT_EGRESS_ALLOW: 'loopback',
      LOG_LEVEL: 'warn',
    });
    const lines: Array<BatchExportRunLine & { exportId: string }> = [];
    await (await jetstreamManager(nc)).consumers.add(PIPELINE_STREAMS.batchExportRuns.name, { durable_name: 'bench', ack_policy: AckPolicy.Explicit });
    const messages = await (await jetstream(nc).consumers.get(PIPELINE_STREAMS.batchExportRuns.name, 'bench')).consume();
    void (async () => {
      for await (const m of messages) {
        for (const line of parseNdjson<BatchExportRunLine>(m.data)) lines.push({ ...line, exportId: m.subject.split('.')[2]! });
        m.ack();
      }
    })();

    const destinations: Array<[string, BatchExportRecord['destination']]> = [
      [
        'S3, JSONLines gzip',
        { type: 'S3', config: { bucket_name: 'bench', region: 'us-east-1', prefix: 'bench', endpoint_url: `http://127.0.0.1:${s3Address.port}`, aws_access_key_id: 'S3RVER', aws_secret_access_key: 'S3RVER', compression: 'gzip' } },
      ],
      [
        'S3, Parquet (snappy)',
        { type: 'S3', config: { bucket_name: 'bench', region: 'us-east-1', prefix: 'bench-parquet', endpoint_url: `http://127.0.0.1:${s3Address.port}`, aws_access_key_id: 'S3RVER', aws_secret_access_key: 'S3RVER', file_format: 'Parquet' } },
      ],
      [
        'PostgreSQL, COPY',
        { type: 'Postgres', config: { host: targetUrl.hostname, port: Number(targetUrl.port), user: 'postgres', password: 'unused', database: 'export_target', table_name: 'events' } },
      ],
    ];
    const runs: ExportRunFigures[] = [];
    const chosen = destinations.filter(([name]) => !o.only || o.only.some((d) => BENCH_DESTINATIONS[d as BenchDestination]?.(name)));
    for (let round = 0; round < rounds; round++) {
      for (const build of builds) {
        const port = await freePort();
        worker = startWorker(build, workerEnv(port, build), o.workerNodeArgs ?? []);
        await waitFor('the worker', async () => (await fetch(`http://127.0.0.1:${port}/_ready`).catch(() => undefined))?.ok === true, 60_000);
        for (const [name, destination] of chosen) {
          runs.push(await runOnce(name, destination, build, worker.pid));
        }
        await worker.stop();
        worker = undefined;
      }
    }
    await messages.close();
    return { events: o.events, eventBytes: Math.round(eventBytes), runs };

    async function runOnce(name: string, destination: BatchExportRecord['destination'], build: WorkerBuild, pid: number): Promise<ExportRunFigures> {
      o.signal?.throwIfAborted();
      const id = crypto.randomUUID();
      const record: BatchExportRecord = {
        id, team_id: 1, name, model: 'events', interval: 'hour', interval_seconds: 3_600, paused: true, start_at: null, end_at: null, hogql_query: null, destination, last_updated_at: new Date().toISOString(),
      };
      await kv.put(id, JSON.stringify(record));
      const idle = rssBytes(pid);
      const rss = sampleRss(pid, 50);
      const cpuBefore = cpuOf(pid, postgres.pid, nats.pid);
      const backfillId = crypto.randomUUID();
      await jetstream(nc).publish(
        pipelineSubject('batchExportBackfills', 1, id),
        JSON.stringify({ id: backfillId, batch_export_id: id, team_id: 1, start_at: new Date(hourStart).toISOString(), end_at: new Date(hourStart + 3_600_000).toISOString(), interval: 'hour', interval_seconds: 3_600, total_runs: 1, created_at: new Date().toISOString() }) + '\n',
        { msgID: `backfill:${backfillId}` },
      );
      o.log(`export run → ${name}…`);
      await waitFor(`the run to ${name}`, () => {
        const failed = lines.find((l) => l.exportId === id && l.status === 'Failed');
        if (failed) throw new Error(`the run to ${name} failed: ${failed.latest_error}`);
        return lines.some((l) => l.exportId === id && l.status === 'Completed');
      }, 900_000, 100);
      const peak = rss.stop();
      const cpuAfter = cpuOf(pid, postgres.pid, nats.pid);
      const running = lines.filter((l) => l.exportId === id && l.status === 'Running').at(-1)!;
      const done = lines.find((l) => l.exportId === id && l.status === 'Completed')!;
      const seconds = (Date.parse(done.updated_at!) - Date.parse(running.updated_at!)) / 1000;
      const cursor = done.cursor ? (JSON.parse(done.cursor) as { bytes_exported?: number }) : {};
      // Each run starts from an empty table, as the first did (dropped after it is measured).
      if (destination.type === 'Postgres') await dropTable(targetUrl, 'events');
      const figures: ExportRunFigures = {
        destination: name,
        build: build.label,
        records: done.records_completed ?? 0,
        seconds,
        eventsPerSecond: Math.round((done.records_completed ?? 0) / seconds),
        bytes: cursor.bytes_exported ?? null,
        idleRssMiB: Math.round(idle / MiB),
        peakRssMiB: Math.round(peak / MiB),
      };
      const records = Math.max(1, figures.records);
      const perEvent = (k: keyof typeof cpuAfter) => Math.round(((cpuAfter[k] - cpuBefore[k]) * 1e6 * 10) / records) / 10;
      figures.cpuMicrosPerEvent = { worker: perEvent('worker'), postgres: perEvent('postgres'), nats: perEvent('nats'), bench: perEvent('bench') };
      figures.workerThreadsMicrosPerEvent = { main: perEvent('main'), others: perEvent('others') };
      o.log(
        `${name}${builds.length > 1 ? ` [${build.label}]` : ''}: ${figures.eventsPerSecond.toLocaleString('en-US')} events/s (${figures.records} in ${seconds.toFixed(1)} s); worker RSS ${figures.idleRssMiB} → peak ${figures.peakRssMiB} MiB; ` +
          `CPU µs/event ${JSON.stringify(figures.cpuMicrosPerEvent)}, worker threads ${JSON.stringify(figures.workerThreadsMicrosPerEvent)}`,
      );
      return figures;
    }
  } finally {
    await worker?.stop().catch(() => undefined);
    await s3.close().catch(() => undefined);
    await servers.stop();
  }
}

/** Medians per destination and build of several runs (each run's figures are in the JSON). */
export function exportMedians(r: ExportThroughputResult): ExportRunFigures[] {
  const groups = new Map<string, ExportRunFigures[]>();
  for (const x of r.runs) groups.set(`${x.destination}\u0000${x.build}`, [...(groups.get(`${x.destination}\u0000${x.build}`) ?? []), x]);
  return [...groups.values()].map((xs) => {
    const m = (f: (x: ExportRunFigures) => number | undefined) => median(xs.map(f).filter((v): v is number => v !== undefined));
    const cpu = xs.every((x) => x.cpuMicrosPerEvent) ? { worker: m((x) => x.cpuMicrosPerEvent?.worker), postgres: m((x) => x.cpuMicrosPerEvent?.postgres), nats: m((x) => x.cpuMicrosPerEvent?.nats), bench: m((x) => x.cpuMicrosPerEvent?.bench) } : undefined;
    const threads = xs.every((x) => x.workerThreadsMicrosPerEvent) ? { main: m((x) => x.workerThreadsMicrosPerEvent?.main), others: m((x) => x.workerThreadsMicrosPerEvent?.others) } : undefined;
    return {
      destination: xs[0]!.destination,
      build: xs[0]!.build,
      records: xs[0]!.records,
      seconds: m((x) => x.seconds),
      eventsPerSecond: Math.round(m((x) => x.eventsPerSecond)),
      bytes: xs[0]!.bytes,
      idleRssMiB: m((x) => x.idleRssMiB),
      peakRssMiB: Math.max(...xs.map((x) => x.peakRssMiB)),
      ...(cpu ? { cpuMicrosPerEvent: cpu } : {}),
      ...(threads ? { workerThreadsMicrosPerEvent: threads } : {}),
      runs: xs.length,
    };
  });
}

export function exportThroughputTable(r: ExportThroughputResult): Table {
  const rows = exportMedians(r) as Array<ExportRunFigures & { runs: number }>;
  const several = rows.some((x) => x.runs > 1);
  const builds = new Set(r.runs.map((x) => x.build)).size > 1;
  return {
    title: 'Batch export runs: one interval from PROCESSED to each destination (bench/exports)',
    note:
      `One backfill run of an interval of ${r.events.toLocaleString('en-US')} events (${r.eventBytes} bytes each on PROCESSED, 1,000 per message) in one worker process, timed from its Running report to its Completed report (planning, reading, formatting, delivery and commit). ` +
      (several ? 'Medians of the runs counted in "runs" (taken in turns), peak RSS the highest of them; every run is in the JSON. ' : '') +
      'Worker RSS: before the run and its peak during it. s3rver runs in the bench process, PostgreSQL and nats-server beside it, all on the same cores. ' +
      'CPU µs per event (user + system, /proc) from the backfill request to Completed: the worker, split into its main thread (the event loop: at most one core) and its other threads (zlib on libuv\'s pool, GC helpers); PostgreSQL, every process of it; nats-server; the bench process, which runs s3rver. ' +
      'On a machine others share, events/s follow the CPU left over; the CPU per event does not (one core gives 10⁶ ÷ their sum events/s; the worker\'s main thread alone caps a run at 10⁶ ÷ its µs).',
    columns: ['destination', ...(builds ? ['build'] : []), ...(several ? ['runs'] : []), 'events/s', 'seconds', 'bytes delivered', 'worker RSS idle → peak (MiB)', 'CPU µs/event: worker', 'main thread', 'other threads', 'PostgreSQL', 'nats-server', 'bench (s3rver)'],
    rows: rows.map((x) => {
      const cpu = x.cpuMicrosPerEvent;
      const t = x.workerThreadsMicrosPerEvent;
      return [x.destination, ...(builds ? [x.build] : []), ...(several ? [x.runs] : []), x.eventsPerSecond, x.seconds, x.bytes ?? '–', `${x.idleRssMiB} → ${x.peakRssMiB}`, cpu?.worker ?? '–', t?.main ?? '–', t?.others ?? '–', cpu?.postgres ?? '–', cpu?.nats ?? '–', cpu?.bench ?? '–'];
    }),
  };
}

const USAGE = `usage: npx tsx bench/exports/throughput.ts [--events N] [--rounds R] [--only s3,parquet,postgres] [--compare DIR]

One batch-export run of N events (default 1,000,000) from PROCESSED to S3 (JSONLines gzip), to S3
(Parquet, snappy) and to PostgreSQL (COPY), each in a worker process; prints the table and the runs
as JSON.
\`npm run bench -- --only exports\` runs the same and writes the report to bench/results/.

  --events N     events in the exported interval (default 1000000)
  --rounds R     runs of each destination (default 1); medians in the table
  --only D,…     destinations: s3 (JSONLines gzip), parquet, postgres
  --worker-node-args ARGS  node options of the worker process, space-separated (--cpu-prof
                 --cpu-prof-dir=DIR, --perf-basic-prof …)
  --compare DIR  also run the worker of another checkout's build (DIR/dist/workers/main.js), in
                 turns with this one (A, B, A, B …) on the same servers and events: a same-run A/B
  -h, --help     this text`;

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values } = parseBenchArgs(USAGE, {
    options: { events: { type: 'string', default: '1000000' }, rounds: { type: 'string', default: '1' }, only: { type: 'string' }, compare: { type: 'string' }, 'worker-node-args': { type: 'string' } },
  });
  const events = Number(values.events);
  const rounds = Number(values.rounds);
  if (!Number.isInteger(events) || events < 1) usageError(USAGE, `--events must be a positive integer, not ${values.events}`);
  if (!Number.isInteger(rounds) || rounds < 1) usageError(USAGE, `--rounds must be a positive integer, not ${values.rounds}`);
  const only = values.only?.split(',').filter(Boolean);
  const unknown = only?.filter((d) => !(d in BENCH_DESTINATIONS));
  if (unknown?.length) usageError(USAGE, `--only takes s3, parquet and postgres, not ${unknown.join(', ')}`);
  const builds: WorkerBuild[] | undefined = values.compare ? [{ label: `before (${values.compare})`, root: values.compare }, { label: 'this build' }] : undefined;
  const result = await runExportThroughput({ events, rounds, builds, only, workerNodeArgs: values['worker-node-args']?.split(' ').filter(Boolean), log: (m) => console.error(`[bench exports] ${m}`) });
  console.log(markdownTable(exportThroughputTable(result)));
  console.log(JSON.stringify(result, null, 2));
  process.exit(0);
}

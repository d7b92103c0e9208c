// Test rig for batch exports without the admin server: real nats-server, PostgreSQL, s3rver and
// an in-process worker (persons role turning captured events into PROCESSED, exports role
// running the exports). Exports are put into the KV bucket as the admin server would; run and
// log lines are read back from BATCH_EXPORT_RUNS / BATCH_EXPORT_LOGS.
import { AckPolicy, jetstreamManager, type JetStreamClient } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { headers } from '@nats-io/transport-node';
import {
  BATCH_EXPORTS_BUCKET,
  ensurePipelineStreams,
  INTERVAL_SECONDS,
  parseNdjson,
  PIPELINE_STREAMS,
  pipelineSubject,
  type BatchExportBackfillRequest,
  type BatchExportInterval,
  type BatchExportLogLine,
  type BatchExportRecord,
  type BatchExportRunLine,
  type NatsConnection,
} from '../../lib/index.js';
import { startWorker, type Worker, type WorkerDeps } from '../../workers/index.js';
import { freshDatabase, startNats, startS3, TEST_PIPELINE_LIMITS, waitFor, type NatsHandle, type S3Handle } from '../kit/index.js';
import { connectAndCreateStreams, testDeps, workerConfig } from '../workers/harness.js';


export interface ExportRig extends AsyncDisposable {
  nats: NatsHandle;
  nc: NatsConnection;
  js: JetStreamClient;
  databaseUrl: string;
  s3: S3Handle;
  /** The in-process worker (undefined with `worker: false`). */
  worker: Worker;
  putExport(record: Partial<BatchExportRecord> & Pick<BatchExportRecord, 'id' | 'destination'>): Promise<BatchExportRecord>;
  deleteExport(id: string): Promise<void>;
  backfill(record: BatchExportRecord, start: string, end: string, id?: string): Promise<string>;
  /** Every run line so far: [export id, line]. */
  runs(): Array<BatchExportRunLine & { exportId: string }>;
  logs(): Array<BatchExportLogLine & { exportId: string }>;
  waitForRun(what: string, test: (line: BatchExportRunLine & { exportId: string }) => boolean, timeoutMs?: number): Promise<BatchExportRunLine>;
  startWorker(env?: Record<string, string>, deps?: WorkerDeps): Promise<Worker>;
  stop(): Promise<void>;
}

export async function startExportRig(
  options: { env?: Record<string, string>; deps?: WorkerDeps; buckets?: string[]; databaseUrl?: string; worker?: boolean } = {},
): Promise<ExportRig> {
  const nats = await startNats();
  const { nc, js } = await connectAndCreateStreams(nats.url);
  await ensurePipelineStreams(await jetstreamManager(nc), TEST_PIPELINE_LIMITS);
  const databaseUrl = options.databaseUrl ?? (await freshDatabase());
  const s3 = await startS3(options.buckets ?? ['exports']);
  const kv = await new Kvm(nc).create(BATCH_EXPORTS_BUCKET, { history: 1 });
  const workers: Worker[] = [];
  const baseEnv = { EXPORT_EGRESS_ALLOW: 'loopback', EXPORT_GRACE: '1s', EXPORT_RETRY_BACKOFF: '200ms', EXPORT_RETRY_MAX_BACKOFF: '1s', WORKER_LEASE_TTL: '3s', ...options.env };
  const spawnWorker = async (env: Record<string, string> = {}, deps: WorkerDeps = {}) => {
    const w = await startWorker(workerConfig(nats.url, databaseUrl, { ...baseEnv, ...env }), testDeps({ ...options.deps, ...deps }));
    workers.push(w);
    return w;
  };
  const worker = options.worker === false ? (undefined as unknown as Worker) : await spawnWorker();

  const runs: Array<BatchExportRunLine & { exportId: string }> = [];
  const logs: Array<BatchExportLogLine & { exportId: string }> = [];
  const jsm = await jetstreamManager(nc);
  const readers: Array<Promise<void>> = [];
  const closers: Array<() => Promise<unknown>> = [];
  for (const [stream, sink] of [
    [PIPELINE_STREAMS.batchExportRuns.name, runs],
    [PIPELINE_STREAMS.batchExportLogs.name, logs],
  ] as const) {
    await jsm.consumers.add(stream, { durable_name: 'test-reader', ack_policy: AckPolicy.Explicit });
    const messages = await (await js.consumers.get(stream, 'test-reader')).consume();
    closers.push(() => messages.close());
    readers.push(
      (async () => {
        for await (const m of messages) {
          const exportId = m.subject.split('.')[2]!;
          for (const line of parseNdjson<Record<string, unknown>>(m.data)) (sink as unknown as Array<Record<string, unknown>>).push({ ...line, exportId });
          m.ack();
        }
      })(),
    );
  }

  const stop = async () => {
    for (const w of workers.splice(0)) await w.stop().catch(() => undefined);
    for (const c of closers) await c().catch(() => undefined);
    await nc.close().catch(() => undefined);
    await s3.stop();
    await nats.stop();
  };

  return {
    nats,
    nc,
    js,
    databaseUrl,
    s3,
    worker,
    async putExport(partial) {
      const interval: BatchExportInterval = partial.interval ?? 'hour';
      const record: BatchExportRecord = {
        team_id: 1,
        name: 'test export',
        model: 'events',
        interval,
        interval_seconds: INTERVAL_SECONDS[interval],
        paused: false,
        start_at: null,
        end_at: null,
        hogql_query: null,
        last_updated_at: new Date().toISOString(),
        ...partial,
      };
      await kv.put(record.id, JSON.stringify(record));
      return record;
    },
    async deleteExport(id) {
      await kv.delete(id);
    },
    async backfill(record, start, end, id = crypto.randomUUID()) {
      const step = record.interval_seconds;
      const request: BatchExportBackfillRequest = {
        id,
        batch_export_id: record.id,
        team_id: record.team_id,
        start_at: start,
        end_at: end,
        interval: record.interval,
        interval_seconds: step,
        total_runs: Math.ceil((Date.parse(end) - Date.parse(start)) / (step * 1000)),
        created_at: new Date().toISOString(),
      };
      const h = headers();
      await js.publish(pipelineSubject('batchExportBackfills', record.team_id, record.id), JSON.stringify(request) + '\n', { msgID: `backfill:${id}`, headers: h });
      return id;
    },
    runs: () => runs,
    logs: () => logs,
    async waitForRun(what, test, timeoutMs = 60_000) {
      let found: BatchExportRunLine | undefined;
      try {
        await waitFor(what, () => Boolean((found = runs.find(test))), timeoutMs, 50);
      } catch (err) {
        throw new Error(`${(err as Error).message}\nruns: ${JSON.stringify(runs.slice(-10), null, 1)}\nlogs: ${logs.slice(-10).map((l) => l.message).join('\n')}`);
      }
      return found!;
    },
    startWorker: spawnWorker,
    stop,
    [Symbol.asyncDispose]: stop,
  };
}

/** An S3 destination on the rig's s3rver (JSONLines gzip under `posthog/{year}-{month}` unless `config` says otherwise). */
export function s3Destination(r: ExportRig, config: Record<string, unknown> = {}): { type: 'S3'; config: Record<string, unknown> } {
  return {
    type: 'S3',
    config: {
      bucket_name: 'exports',
      region: 'us-east-1',
      prefix: 'posthog/{year}-{month}',
      endpoint_url: r.s3.endpoint,
      aws_access_key_id: r.s3.accessKeyId,
      aws_secret_access_key: r.s3.secretAccessKey,
      compression: 'gzip',
      ...config,
    },
  };
}

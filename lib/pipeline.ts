// Pipeline contracts between the admin server, the batch-export runner and the plugin workers
// (ARCHITECTURE.md, "Pipelines"): KV buckets the admin server writes and workers watch, streams
// workers write and the admin server stores, streams of requests the admin server makes.
// Every message is NDJSON (one JSON object per line), like the event streams.
import {
  DiscardPolicy,
  JetStreamApiError,
  RetentionPolicy,
  StorageType,
  type JetStreamManager,
  type StreamConfig,
} from '@nats-io/jetstream';

// --- KV buckets (admin → workers) -------------------------------------------------------------

/** KV: batch export id → BatchExportRecord (absent once deleted). Watched by the export runner. */
export const BATCH_EXPORTS_BUCKET = 'spate-batch-exports';
/** KV: project id (decimal) → PluginConfigsRecord (absent when the project has no enabled config). */
export const PLUGIN_CONFIGS_BUCKET = 'spate-plugin-configs';
/**
 * KV: SHA-256 (hex) of a plugin's compiled code → that code (lib/plugin-source.ts), for every
 * plugin that has code; the plugin configs' records name it by `plugin.source_hash`.
 */
export const PLUGIN_SOURCES_BUCKET = 'spate-plugin-sources';

export const BATCH_EXPORT_INTERVALS = ['hour', 'day', 'week', 'every 5 minutes', 'every 15 minutes'] as const;
export type BatchExportInterval = (typeof BATCH_EXPORT_INTERVALS)[number];

/** Length of one run's data interval, in seconds (days and weeks are fixed lengths, UTC). */
export const INTERVAL_SECONDS: Readonly<Record<BatchExportInterval, number>> = {
  hour: 3_600,
  day: 86_400,
  week: 604_800,
  'every 5 minutes': 300,
  'every 15 minutes': 900,
};

export interface BatchExportRecord {
  id: string;
  team_id: number;
  name: string;
  model: 'events' | 'persons';
  interval: BatchExportInterval;
  interval_seconds: number;
  paused: boolean;
  /** ISO 8601; no run before / after it. null: unbounded. */
  start_at: string | null;
  end_at: string | null;
  hogql_query: string | null;
  /** The full destination configuration, secrets included: the runner needs them to connect. */
  destination: { type: string; config: Record<string, unknown> };
  last_updated_at: string;
}

export interface PluginConfigsRecord {
  team_id: number;
  /** Enabled configs in the order to run them (order, then plugin id, then config id). */
  configs: Array<{
    id: number;
    plugin_id: number;
    order: number;
    /** The configuration values, secrets included (plugins need them). */
    config: Record<string, unknown>;
    plugin: {
      name: string;
      plugin_type: string;
      url: string | null;
      tag: string | null;
      capabilities: Record<string, unknown>;
      updated_at: string;
      /** Key of its compiled code in spate-plugin-sources; null when it has no index.ts / index.js. */
      source_hash: string | null;
    };
    updated_at: string;
  }>;
}

// --- streams ----------------------------------------------------------------------------------

export const PIPELINE_STREAMS = {
  /** workers → admin: plugin log entries. */
  pluginLogs: { name: 'PLUGIN_LOGS', prefix: 'plugin_logs', retention: 'workqueue' },
  /** export runner → admin: log entries of batch export runs. */
  batchExportLogs: { name: 'BATCH_EXPORT_LOGS', prefix: 'batch_export_logs', retention: 'workqueue' },
  /** export runner → admin: run status updates. */
  batchExportRuns: { name: 'BATCH_EXPORT_RUNS', prefix: 'batch_export_runs', retention: 'workqueue' },
  /** admin → export runner: backfill requests. */
  batchExportBackfills: { name: 'BATCH_EXPORT_BACKFILLS', prefix: 'batch_export_backfills', retention: 'limits' },
  /** admin → plugin workers: job requests (POST …/plugin_configs/:id/job/). */
  pluginJobs: { name: 'PLUGIN_JOBS', prefix: 'plugin_jobs', retention: 'limits' },
} as const;

export type PipelineStream = keyof typeof PIPELINE_STREAMS;

/** `<prefix>.<teamId>.<id>`: the id is the plugin config id or the batch export id. */
export function pipelineSubject(stream: PipelineStream, teamId: number, id: number | string): string {
  return `${PIPELINE_STREAMS[stream].prefix}.${teamId}.${id}`;
}

/** Parses `<prefix>.<teamId>.<id>` of `stream`; undefined when the subject is not one of its. */
export function parsePipelineSubject(stream: PipelineStream, subject: string): { teamId: number; id: string } | undefined {
  const parts = subject.split('.');
  if (parts.length !== 3 || parts[0] !== PIPELINE_STREAMS[stream].prefix) return undefined;
  if (!/^\d{1,10}$/.test(parts[1]!) || parts[2] === '') return undefined;
  return { teamId: Number(parts[1]), id: parts[2]! };
}

export interface PipelineStreamLimits {
  replicas: number;
  /** Bytes per stream; -1 is unlimited. New messages are refused when full (the publisher sees it). */
  maxBytes: number;
  /** Requests (backfills, jobs) older than this are removed, in milliseconds; 0 keeps them. */
  requestMaxAgeMs: number;
  /** JetStream de-duplication window for Nats-Msg-Id, in milliseconds. */
  duplicateWindowMs: number;
}

const MS_TO_NANOS = 1_000_000;

export function pipelineStreamConfig(stream: PipelineStream, limits: PipelineStreamLimits): Partial<StreamConfig> & { name: string } {
  const def = PIPELINE_STREAMS[stream];
  return {
    name: def.name,
    subjects: [`${def.prefix}.>`],
    storage: StorageType.File,
    // Reports to the admin server are gone once it stored them; requests stay for any number of
    // consumers (a runner deployed later still finds them) until they age out.
    retention: def.retention === 'workqueue' ? RetentionPolicy.Workqueue : RetentionPolicy.Limits,
    discard: DiscardPolicy.New,
    num_replicas: limits.replicas,
    max_bytes: limits.maxBytes,
    max_age: def.retention === 'limits' ? limits.requestMaxAgeMs * MS_TO_NANOS : 0,
    duplicate_window: limits.duplicateWindowMs * MS_TO_NANOS,
  };
}

/** Creates or updates the pipeline streams. Idempotent. */
export async function ensurePipelineStreams(jsm: JetStreamManager, limits: PipelineStreamLimits): Promise<void> {
  for (const stream of Object.keys(PIPELINE_STREAMS) as PipelineStream[]) {
    const config = pipelineStreamConfig(stream, limits);
    try {
      const { config: current } = await jsm.streams.info(config.name);
      const differs =
        current.num_replicas !== config.num_replicas ||
        current.max_bytes !== config.max_bytes ||
        current.max_age !== config.max_age ||
        current.duplicate_window !== config.duplicate_window;
      if (differs) await jsm.streams.update(config.name, { ...current, ...config });
    } catch (err) {
      if (!(err instanceof JetStreamApiError) || err.status !== 404) throw err;
      await jsm.streams.add(config);
    }
  }
}

// --- lines on the streams -----------------------------------------------------------------------

export const PLUGIN_LOG_SOURCES = ['SYSTEM', 'PLUGIN', 'CONSOLE'] as const;
export const PLUGIN_LOG_TYPES = ['DEBUG', 'LOG', 'INFO', 'WARN', 'ERROR'] as const;
export const BATCH_EXPORT_LOG_LEVELS = ['DEBUG', 'LOG', 'INFO', 'WARNING', 'ERROR'] as const;
export const BATCH_EXPORT_RUN_STATUSES = [
  'Starting',
  'Running',
  'Completed',
  'Failed',
  'FailedRetryable',
  'Cancelled',
  'TimedOut',
  'Terminated',
] as const;
export type BatchExportRunStatus = (typeof BATCH_EXPORT_RUN_STATUSES)[number];
/** Statuses after which a run does nothing more (FailedRetryable will be retried). */
export const TERMINAL_RUN_STATUSES: readonly BatchExportRunStatus[] = ['Completed', 'Failed', 'Cancelled', 'TimedOut', 'Terminated'];

/**
 * A line of `plugin_logs.<teamId>.<pluginConfigId>`. The subject names the team and config.
 * `id` makes redelivery harmless (stored once); without it, one is derived from the stream
 * sequence and line number. `timestamp` defaults to when the stream stored the message.
 */
export interface PluginLogLine {
  id?: string;
  timestamp?: string;
  source?: (typeof PLUGIN_LOG_SOURCES)[number];
  type?: (typeof PLUGIN_LOG_TYPES)[number];
  message: string;
  instance_id?: string | null;
  /**
   * Set by the plugin runtime on a SYSTEM line when it gives a config up (setupPlugin kept
   * failing, the circuit breaker opened): the admin server disables the config, unless it changed
   * after `timestamp`, and records this reason in the activity log.
   */
  disable_plugin_config?: string | null;
}

/** A line of `batch_export_logs.<teamId>.<batchExportId>` (same defaults as PluginLogLine). */
export interface BatchExportLogLine {
  id?: string;
  run_id?: string | null;
  timestamp?: string;
  level?: (typeof BATCH_EXPORT_LOG_LEVELS)[number];
  message: string;
  instance_id?: string | null;
}

/**
 * A line of `batch_export_runs.<teamId>.<batchExportId>`: the state of the run of one data
 * interval (of a backfill, or of the schedule when backfill_id is absent). Runs are identified by
 * (export, backfill, data_interval_start, data_interval_end); an older `updated_at` than the
 * stored one is ignored, so redelivered or reordered lines never move a run back.
 */
export interface BatchExportRunLine {
  backfill_id?: string | null;
  data_interval_start?: string | null;
  data_interval_end: string;
  status: BatchExportRunStatus;
  records_completed?: number | null;
  records_total_count?: number | null;
  latest_error?: string | null;
  cursor?: string | null;
  finished_at?: string | null;
  /** When the runner observed this state; defaults to when the stream stored the message. */
  updated_at?: string;
  /**
   * Set by the runner on a Failed run when the export failed too often (EXPORT_AUTO_PAUSE): the
   * admin server pauses the export (unless it changed after `updated_at`) and records this
   * reason in the activity log.
   */
  pause_export?: string | null;
}

/**
 * A message of `batch_export_backfills.<teamId>.<batchExportId>` (Nats-Msg-Id `backfill:<id>`).
 * Its runs are the intervals [start_at + k·interval_seconds, min(start_at + (k+1)·interval_seconds,
 * end_at)), k = 0, 1, …, each already recorded with status Starting.
 */
export interface BatchExportBackfillRequest {
  id: string;
  batch_export_id: string;
  team_id: number;
  start_at: string;
  end_at: string;
  interval: BatchExportInterval;
  interval_seconds: number;
  total_runs: number;
  created_at: string;
}

/** A message of `plugin_jobs.<teamId>.<pluginConfigId>` (Nats-Msg-Id `job:<id>`). */
export interface PluginJobRequest {
  id: string;
  team_id: number;
  plugin_config_id: number;
  plugin_id: number;
  type: string;
  payload: Record<string, unknown>;
  operation: 'start' | 'stop';
  created_at: string;
}

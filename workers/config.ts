// The worker's configuration: one definition, read from the environment once (lib/config.ts).
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import { configHelp, configuredStreamLayout, envBool, envBytes, envDuration, envInt, envRatio, envString, loadConfig, natsAuthSettings, secretKeySettings, setting, streamPartitionsSettings, type ConfigOf } from '../lib/index.js';

export const workerConfigDefinition = {
  natsUrl: setting('NATS_URL', envString('nats://127.0.0.1:4222'), 'NATS server URL(s), comma-separated'),
  ...natsAuthSettings('worker'),
  // The batch-export runner and the plugin runtime decrypt destination and plugin secrets with it.
  ...secretKeySettings(),
  databaseUrl: setting(
    'DATABASE_URL',
    envString('postgres://postgres@127.0.0.1:5432/spate'),
    'PostgreSQL URL for person, group, dedup and position state',
  ),
  shardCount: setting('SHARD_COUNT', envInt(16, 1), 'shards per stream; must match the cluster (checked in the spate-cluster KV bucket)'),
  ...streamPartitionsSettings(),
  natsReplicas: setting('NATS_REPLICAS', envInt(1, 1), 'replicas of the KV buckets the worker creates (3 on a 3-node cluster)'),
  workerId: setting(
    'WORKER_ID',
    z.string().regex(/^[A-Za-z0-9_-]{0,64}$/, 'letters, digits, - and _ only (at most 64)').default(''),
    'this worker\'s name in the membership bucket; empty: <host>-<pid>-<random>',
  ),
  metricsHost: setting('WORKER_METRICS_HOST', envString('127.0.0.1'), 'address of the /metrics, /_health, /_ready server'),
  metricsPort: setting('WORKER_METRICS_PORT', envInt(0, 0), 'port of the /metrics, /_health, /_ready server (0 = any free port)'),
  leaseTtl: setting(
    'WORKER_LEASE_TTL',
    envDuration('10s'),
    'shard lease time-to-live: a worker that dies loses its shards after this long (the first worker sets it on the bucket)',
  ),
  batchConcurrency: setting(
    'WORKER_BATCH_CONCURRENCY',
    envInt(4, 1),
    'batches this worker processes at once, across all its shards and streams (the others wait their turn): a few overlap PostgreSQL and NATS round trips; each holds its events in memory, so many more slow the worker down (garbage collection)',
  ),
  batchLinger: setting(
    'WORKER_BATCH_LINGER',
    envDuration('200ms'),
    'a batch smaller than the limits waits this long after its first message arrived for more to come (0: none): fewer, larger batches cost far less CPU per event in the worker and PostgreSQL, for up to this much more lag',
  ),
  batchMaxEvents: setting('WORKER_BATCH_MAX_EVENTS', envInt(10_000, 1), 'most events processed in one batch (one transaction)'),
  batchMaxBytes: setting('WORKER_BATCH_MAX_BYTES', envBytes('8MiB'), 'most source bytes processed in one batch'),
  fetchMaxBytes: setting(
    'WORKER_FETCH_MAX_BYTES',
    envBytes('2MiB'),
    "bytes each shard consumer asks JetStream for ahead of processing (all of a worker's shards share one connection, whose unread bytes the server bounds with max_pending)",
  ),
  publishPartBytes: setting('WORKER_PUBLISH_PART_BYTES', envBytes('1MiB'), 'source bytes packed into one PROCESSED message'),
  dedupWindow: setting(
    'WORKER_DEDUP_WINDOW',
    envDuration('1h'),
    'an event uuid seen again within this window (up to twice it) is dropped as a duplicate',
  ),
  warningRetention: setting(
    'WORKER_WARNING_RETENTION',
    envDuration('30d'),
    'ingestion warnings older than this are deleted (checked at least every minute; 0 keeps them all)',
  ),
  maxPropertiesBytes: setting(
    'WORKER_MAX_PROPERTIES_BYTES',
    envBytes('512KiB'),
    'largest person or group properties kept, in bytes of JSON: an update that would make them larger is not stored (ingestion warning person_properties_too_large or group_properties_too_large); the event is processed all the same',
  ),
  personCacheSize: setting('WORKER_PERSON_CACHE_SIZE', envInt(200_000, 0), 'persons kept in memory (validated against Postgres every batch)'),
  dbPoolSize: setting('WORKER_DB_POOL_SIZE', envInt(20, 2), 'PostgreSQL connections of this worker for batches (two more write groups)'),
  exports: setting(
    'WORKER_EXPORTS',
    envBool(true),
    'run batch exports in this worker (docs/exports.md); false leaves them to the other workers of the cluster',
  ),
  exportEgressAllow: setting(
    'EXPORT_EGRESS_ALLOW',
    envString(''),
    'non-public addresses export destinations may reach, comma-separated: loopback, private (private, link-local and reserved ranges) and CIDR ranges; empty: public addresses only (npm start sets loopback)',
  ),
  exportConcurrency: setting(
    'EXPORT_CONCURRENCY',
    envInt(2, 1),
    "runs this worker delivers at once, across the exports it holds (the others wait their turn): each holds up to ~100 MiB (docs/exports.md)",
  ),
  exportFormatThreads: setting(
    'EXPORT_FORMAT_THREADS',
    envInt(2, 1),
    'threads of this worker that parse and format the events of S3 JSONLines runs, beside its event loop (started with the first such run; ~40 MiB each)',
  ),
  exportGrace: setting('EXPORT_GRACE', envDuration('30s'), 'a scheduled run for [start, end) starts this long after end'),
  exportRetryBackoff: setting('EXPORT_RETRY_BACKOFF', envDuration('30s'), 'wait before the first retry of a run that failed for a reason of the moment; doubled for each further one'),
  exportRetryMaxBackoff: setting('EXPORT_RETRY_MAX_BACKOFF', envDuration('2m'), 'longest wait between retries of a run'),
  exportHttpRetryBackoff: setting(
    'EXPORT_HTTP_RETRY_BACKOFF',
    envDuration('1s'),
    'HTTP destinations: wait before re-sending a request answered 5xx, 429 or 408 (or cut by the network), doubled for each of the 5 tries',
  ),
  exportRetryAttempts: setting('EXPORT_RETRY_ATTEMPTS', envInt(10, 1), 'attempts of a run before it is Failed (a failure that cannot pass by itself fails at once)'),
  exportAutoPause: setting(
    'EXPORT_AUTO_PAUSE',
    envRatio('10/50'),
    'pause an export when N of its last M scheduled runs Failed (0/M: never), as PostHog does',
  ),
  exportBackfillSkew: setting(
    'EXPORT_BACKFILL_SKEW',
    envDuration('10m'),
    'a backfill of [start, end) reads events that arrived from start minus this on (events stamped later than they arrived, by client clocks)',
  ),
  exportBackfillCatchUp: setting(
    'EXPORT_BACKFILL_CATCH_UP',
    envDuration('30s'),
    'a backfill run first waits this long at most for the workers to process what the capture streams held when it started; still behind, it is FailedRetryable and tried again after EXPORT_RETRY_BACKOFF',
  ),
  exportReadBytes: setting('EXPORT_READ_BYTES', envBytes('16MiB'), 'bytes a run pulls from PROCESSED at once (with the S3 upload parts, what bounds a run\'s memory)'),
  exportDbPoolSize: setting('EXPORT_DB_POOL_SIZE', envInt(4, 2), 'PostgreSQL connections of the exports role (its state, the persons model)'),
  pluginEgressAllow: setting(
    'PLUGIN_EGRESS_ALLOW',
    envString(''),
    "non-public addresses plugins' fetch may reach, comma-separated: loopback, private (private, link-local and reserved ranges) and CIDR ranges; empty: public addresses only (npm start sets loopback)",
  ),
  pluginMemoryLimit: setting('PLUGIN_MEMORY_LIMIT', envBytes('64MiB'), "memory of each plugin instance's sandbox (QuickJS heap): past it, what allocates fails with out of memory"),
  pluginCpuTimeout: setting(
    'PLUGIN_CPU_TIMEOUT',
    envDuration('100ms'),
    'time a plugin may run in its sandbox on one event (or one setupPlugin, teardownPlugin, scheduled task or job), on the clock while its code runs, so a busy host counts against it: past it the call is stopped where it runs, the event goes on unchanged and an ERROR names the plugin and event',
  ),
  pluginWallTimeout: setting(
    'PLUGIN_WALL_TIMEOUT',
    envDuration('10s'),
    "longest a batch's plugin call (or a setupPlugin) waits for what it awaits (fetch, storage, cache): events still waiting then go on unchanged",
  ),
  pluginSetupAttempts: setting('PLUGIN_SETUP_ATTEMPTS', envInt(3, 1), 'attempts at loading a plugin and running its setupPlugin before the config is disabled (a SYSTEM log says why)'),
  pluginSetupBackoff: setting('PLUGIN_SETUP_BACKOFF', envDuration('2s'), 'wait before the second attempt at setupPlugin, doubled for each further one'),
  pluginLogRate: setting(
    'PLUGIN_LOG_RATE',
    envInt(100, 1),
    'log lines per second each plugin config may write, in bursts of up to 10 times that: more are dropped and counted in one WARN line',
  ),
  pluginBreaker: setting(
    'PLUGIN_BREAKER',
    envRatio('50/100'),
    'disable a plugin config when N of the last M events it handled in this worker failed (threw, ran out of time or memory); 0/M: never',
  ),
  pluginDeliveryBatch: setting(
    'PLUGIN_DELIVERY_BATCH',
    envInt(500, 1),
    "most processed events in one batch of a destination (onEvent, composeWebhook): one sandbox call while the plugin is quick, and the destination's position is recorded in PostgreSQL after each",
  ),
  pluginDeliveryWindow: setting(
    'PLUGIN_DELIVERY_WINDOW',
    envInt(4, 1),
    'batches of one destination in flight at once (the sandbox composes the next while the requests of the others are answered); a worker stopped outright delivers them again from its successor',
  ),
  pluginDeliveryAttempts: setting(
    'PLUGIN_DELIVERY_ATTEMPTS',
    envInt(5, 1),
    "attempts at delivering an event to a destination (onEvent threw or ran out of time; the webhook failed to connect, or was answered 408, 429 or 5xx) before it is skipped with an ERROR in the config's logs",
  ),
  pluginDeliveryBackoff: setting(
    'PLUGIN_DELIVERY_BACKOFF',
    envDuration('1s'),
    'wait before the second attempt at delivering an event, doubled for each further one (at most 1 minute); the destination waits meanwhile, other configs and ingestion do not',
  ),
  pluginWebhookConnections: setting(
    'PLUGIN_WEBHOOK_CONNECTIONS',
    envInt(32, 1),
    'keep-alive connections the worker opens to each origin composeWebhook sends to (shared by its configs): with one request at a time on each, a destination 50 ms away takes at most this many ÷ 0.05 requests per second',
  ),
  pluginWebhookPipelining: setting(
    'PLUGIN_WEBHOOK_PIPELINING',
    envInt(1, 1),
    'webhook requests in flight on one connection (HTTP/1.1 pipelining; 1: one at a time): more raise the rate to distant destinations that support it; a connection that breaks has all its requests sent again',
  ),
  pluginWebhookInFlight: setting('PLUGIN_WEBHOOK_IN_FLIGHT', envInt(256, 1), 'webhook requests of one destination config in flight at once'),
  pluginBreakerTimeouts: setting(
    'PLUGIN_BREAKER_TIMEOUTS',
    envInt(5, 0),
    'disable a plugin config when this many of the last PLUGIN_BREAKER M events ran out of time (each holds its shard up to twice PLUGIN_CPU_TIMEOUT), and let no more than this many of one batch run out of time: the rest of the batch goes on without the plugin; 0: never (a batch then waits for each of its events to time out)',
  ),
};

export type WorkerConfig = ConfigOf<typeof workerConfigDefinition>;

export function loadWorkerConfig(env: Readonly<Record<string, string | undefined>> = process.env): WorkerConfig {
  const config = loadConfig(workerConfigDefinition, env);
  configuredStreamLayout(config);
  return config;
}

export function workerHelp(): string {
  return configHelp('spate worker — per-shard person, alias and group processing and batch exports (node dist/workers/main.js)', workerConfigDefinition);
}

/** A worker id that is unique per process and readable in logs: host-pid-random. */
export function defaultWorkerId(): string {
  const host = hostname().replace(/[^A-Za-z0-9_-]/g, '-').slice(0, 40) || 'host';
  return `${host}-${process.pid}-${randomBytes(3).toString('hex')}`;
}

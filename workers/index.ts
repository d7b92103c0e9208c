// The worker deployable (ARCHITECTURE.md, docs/workers.md): start-up, the coordination every role
// shares (coordination/), and the roles that run on it (persons/).
import { setTimeout as sleep } from 'node:timers/promises';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import {
  configuredStreamLayout,
  connectNats,
  createLogger,
  ensureClusterSettings,
  natsAuthOf,
  secretKeyringOf,
  retryUnanswered,
  streamsPresent,
  type Logger,
  type NatsConnection,
  type Registry,
} from '../lib/index.js';
import { defaultWorkerId, type WorkerConfig } from './config.js';
import {
  createCoordinationMetrics,
  createWorkerRegistry,
  errorText,
  EventHooks,
  isTransientDbError,
  openWorkersBucket,
  ShardCoordinator,
  startStatusServer,
} from './coordination/index.js';
import { startExports, type ExportClock, type ExportFaults, type ExportsRole } from './exports/index.js';
import { migrateWorkerSchema } from './migrate.js';
import { startPersons, type PersonsRole, type WorkerFaults } from './persons/index.js';
import { startPlugins, type PluginsRole, type TaskClock } from './plugins/index.js';

export { loadWorkerConfig, workerConfigDefinition, workerHelp, type WorkerConfig } from './config.js';
export { assignShards, EventHooks, WORKERS_BUCKET, type BeforePersonsHook, type HookBatch, type HookedEvent } from './coordination/index.js';
export { CONSUMED_STREAMS, personUuidFor, WARNING_TYPES, type WarningType, type WorkerFaults } from './persons/index.js';
export { EXPORT_LEASES, shiftedClock, type ExportClock, type ExportFaults } from './exports/index.js';
export { PLUGIN_LEASES, periodStart, REAL_TASK_CLOCK, type TaskClock } from './plugins/index.js';

export interface WorkerDeps {
  logger?: Logger;
  /** A NATS connection to use (not closed by stop()); by default the worker connects to NATS_URL. */
  nc?: NatsConnection;
  /** Hooks run on each batch's events before person processing; by default none (a role adds its own). */
  eventHooks?: EventHooks;
  faults?: WorkerFaults;
  /** The export runner's clock (tests shift it to reach an interval's end sooner); real time by default. */
  exportClock?: ExportClock;
  exportFaults?: ExportFaults;
  /** The plugins' scheduled tasks' clock (tests shorten the periods); real UTC periods by default. */
  pluginTaskClock?: TaskClock;
}

export interface Worker {
  readonly workerId: string;
  /** Base URL of /metrics, /_health, /_ready. */
  readonly statusUrl: string;
  readonly metrics: { readonly registry: Registry };
  ownedShards(): number[];
  /** Batch exports whose lease this worker holds (none with WORKER_EXPORTS=false). */
  heldExports(): string[];
  /** Plugin configs whose lease this worker holds (their destination, scheduled tasks and jobs). */
  heldPluginConfigs(): number[];
  ready(): boolean;
  /** Ordered and idempotent: leave the cluster, finish and commit batches in flight, free leases, drain NATS, close Postgres. */
  stop(): Promise<void>;
}

export async function startWorker(config: WorkerConfig, deps: WorkerDeps = {}): Promise<Worker> {
  const workerId = config.workerId || defaultWorkerId();
  const layout = configuredStreamLayout(config);
  const logger = (deps.logger ?? createLogger('worker')).child({ workerId });
  const registry = createWorkerRegistry();
  const coordinationMetrics = createCoordinationMetrics(registry);
  let stage = 'starting';
  let coordinator: ShardCoordinator | undefined;
  let persons: PersonsRole | undefined;
  let exports: ExportsRole | undefined;
  let plugins: PluginsRole | undefined;
  let stopping = false;

  const status = await startStatusServer(config.metricsHost, config.metricsPort, registry, () => ({
    ready: stage === 'running' && !stopping && coordinator?.joinedCluster === true,
    detail: { stage, shards: coordinator?.ownedShards() ?? [] },
  }));
  logger.info({ url: status.url }, 'status server listening');

  const ownNats = deps.nc === undefined;
  const nc = deps.nc ?? (await connectNats(config.natsUrl, `spate-worker-${workerId}`, natsAuthOf(config)));
  const fail = async (err: unknown): Promise<never> => {
    await coordinator?.stop().catch(() => undefined);
    await exports?.stop().catch(() => undefined);
    await plugins?.stop().catch(() => undefined);
    await persons?.stop().catch(() => undefined);
    if (ownNats) await nc.close().catch(() => undefined);
    await status.close();
    throw err;
  };

  try {
    stage = 'checking cluster settings';
    await ensureClusterSettings(nc, { shardCount: config.shardCount, streamPartitions: config.streamPartitions }, config.natsReplicas, logger);
    const jsm = await retryUnanswered('jetstream manager', () => jetstreamManager(nc), logger);
    stage = 'waiting for streams';
    for (let attempt = 0; !(await streamsPresent(jsm, layout)); attempt++) {
      if (attempt % 20 === 0) logger.info('waiting for the JetStream streams (created by ingest or the launcher)');
      await sleep(500);
    }

    stage = 'migrating';
    for (let attempt = 0; ; attempt++) {
      try {
        const ran = await migrateWorkerSchema(config.databaseUrl, logger);
        if (ran.length > 0) logger.info({ migrations: ran }, 'worker schema migrated');
        break;
      } catch (err) {
        if (!isTransientDbError(err) || attempt >= 120) throw err;
        if (attempt % 10 === 0) logger.warn({ err: errorText(err) }, 'postgres unavailable: waiting to migrate');
        await sleep(500);
      }
    }

    // Before the persons role: its first batch runs the transformations the catalog knows.
    stage = 'loading plugins';
    const hooks = deps.eventHooks ?? new EventHooks();
    plugins = await startPlugins(
      {
        databaseUrl: config.databaseUrl,
        keyring: secretKeyringOf(config),
        egressAllow: config.pluginEgressAllow,
        // 256 KiB: deep recursion fails in the plugin (~1,300 frames of a small function) before
        // Node's own stack does under the engine's frames (at 1 MiB it did: the engine broke).
        limits: {
          memoryBytes: config.pluginMemoryLimit,
          stackBytes: 256 * 1024,
          cpuMs: config.pluginCpuTimeout,
          wallMs: config.pluginWallTimeout,
          batchTimeouts: config.pluginBreakerTimeouts,
        },
        setup: { attempts: config.pluginSetupAttempts, backoffMs: config.pluginSetupBackoff },
        breaker: { failures: config.pluginBreaker.n, of: config.pluginBreaker.of, timeouts: config.pluginBreakerTimeouts },
        logRatePerSecond: config.pluginLogRate,
        workerId,
        held: {
          delivery: {
            batchEvents: config.pluginDeliveryBatch,
            window: config.pluginDeliveryWindow,
            attempts: config.pluginDeliveryAttempts,
            backoffMs: config.pluginDeliveryBackoff,
          },
          webhooks: {
            connections: config.pluginWebhookConnections,
            pipelining: config.pluginWebhookPipelining,
            inFlight: config.pluginWebhookInFlight,
            timeoutMs: config.pluginWallTimeout,
          },
        },
      },
      { nc, js: jetstream(nc), jsm, registry, logger, hooks, maxPayload: () => nc.info?.max_payload ?? 1024 * 1024, taskClock: deps.pluginTaskClock },
    );

    const personsRole = await startPersons(
      {
        workerId,
        databaseUrl: config.databaseUrl,
        dbPoolSize: config.dbPoolSize,
        batchConcurrency: config.batchConcurrency,
        limits: {
          maxEvents: config.batchMaxEvents,
          maxBytes: config.batchMaxBytes,
          lingerMs: config.batchLinger,
          fetchMaxBytes: config.fetchMaxBytes,
          publishPartBytes: config.publishPartBytes,
          maxPropertiesBytes: config.maxPropertiesBytes,
        },
        personCacheSize: config.personCacheSize,
        dedupWindow: config.dedupWindow,
        layout,
        warningRetention: config.warningRetention,
      },
      {
        js: jetstream(nc),
        jsm,
        registry,
        logger,
        hooks,
        maxPayload: () => nc.info?.max_payload ?? 1024 * 1024,
        faults: deps.faults,
      },
    );
    persons = personsRole;

    stage = 'joining';
    const bucket = await retryUnanswered('workers bucket', () => openWorkersBucket(nc, config.leaseTtl, config.natsReplicas, logger), logger);
    coordinator = new ShardCoordinator(
      bucket.kv,
      { workerId, shardCount: config.shardCount, ttlMs: bucket.ttlMs, replicas: config.natsReplicas },
      (lease, lost) => personsRole.runShard(lease, lost),
      logger,
      coordinationMetrics,
    );
    plugins.hold(coordinator);
    if (config.exports) {
      exports = startExports(
        {
          workerId,
          databaseUrl: config.databaseUrl,
          dbPoolSize: config.exportDbPoolSize,
          egressAllow: config.exportEgressAllow,
          readBytes: config.exportReadBytes,
          graceMs: config.exportGrace,
          retryBackoffMs: config.exportRetryBackoff,
          retryMaxBackoffMs: config.exportRetryMaxBackoff,
          retryAttempts: config.exportRetryAttempts,
          autoPause: { failures: config.exportAutoPause.n, of: config.exportAutoPause.of },
          backfillSkewMs: config.exportBackfillSkew,
          backfillCatchUpMs: config.exportBackfillCatchUp,
          pollMs: 1_000,
          concurrency: config.exportConcurrency,
          formatThreads: config.exportFormatThreads,
          httpRetryBaseMs: config.exportHttpRetryBackoff,
          keyring: secretKeyringOf(config),
        },
        { nc, js: jetstream(nc), jsm, registry, logger, coordinator, layout, clock: deps.exportClock, faults: deps.exportFaults },
      );
    }
    await coordinator.start();
    stage = 'running';
    logger.info({ shards: coordinator.ownedShards() }, 'worker running');
  } catch (err) {
    return fail(err);
  }

  let stopped: Promise<void> | undefined;
  const stop = () =>
    (stopped ??= (async () => {
      stopping = true;
      stage = 'stopping';
      logger.info('stopping: leaving the cluster and finishing batches in flight');
      await coordinator?.stop().catch((err: unknown) => logger.warn({ err: errorText(err) }, 'leaving the cluster failed'));
      // teardownPlugin and the last plugin log lines still need NATS.
      await plugins?.stop().catch((err: unknown) => logger.warn({ err: errorText(err) }, 'cleanup failed'));
      if (ownNats) await nc.drain().catch(() => undefined);
      await exports?.stop().catch((err: unknown) => logger.warn({ err: errorText(err) }, 'cleanup failed'));
      await persons?.stop().catch((err: unknown) => logger.warn({ err: errorText(err) }, 'cleanup failed'));
      await status.close();
      stage = 'stopped';
      logger.info('stopped');
    })());

  return {
    workerId,
    statusUrl: status.url,
    metrics: { registry },
    ownedShards: () => coordinator?.ownedShards() ?? [],
    heldExports: () => exports?.held() ?? [],
    heldPluginConfigs: () => plugins?.heldConfigs() ?? [],
    ready: () => stage === 'running' && !stopping,
    stop,
  };
}

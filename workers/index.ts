// The worker deployable: per-shard processing of persons, aliases and groups (ARCHITECTURE.md).
import { setTimeout as sleep } from 'node:timers/promises';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import pLimit from 'p-limit';
import {
  connectNats,
  createLogger,
  ensureClusterSettings,
  retryUnanswered,
  streamsPresent,
  type Logger,
  type NatsConnection,
  type StreamKind,
} from '../lib/index.js';
import { defaultWorkerId, type WorkerConfig } from './config.js';
import { createPool, isTransientDbError } from './db.js';
import { DedupGenerations, type DedupUpkeep } from './dedup.js';
import { GroupTypeRegistry } from './group-types.js';
import { GroupWriter } from './group-writer.js';
import { startStatusServer } from './http-server.js';
import { createWorkerMetrics, type WorkerMetrics } from './metrics.js';
import { migrateWorkerSchema } from './migrate.js';
import { PersonCache } from './person-cache.js';
import { errorText, PartitionProcessor, type PartitionContext, type WorkerFaults } from './partition-processor.js';
import { openWorkersBucket, ShardCoordinator } from './shard-coordinator.js';
import { pruneWarnings } from './warnings.js';

export { loadWorkerConfig, workerConfigDefinition, workerHelp, type WorkerConfig } from './config.js';
export { WORKERS_BUCKET } from './shard-coordinator.js';
export { assignShards } from './assignment.js';
export { personUuidFor } from './person-workspace.js';
export type { WorkerFaults } from './partition-processor.js';
export { WARNING_TYPES, type WarningType } from './warnings.js';

/** Streams a worker consumes per owned shard; PROCESSED is its output. */
export const CONSUMED_STREAMS: readonly StreamKind[] = ['events', 'historical', 'overflow'];

export interface WorkerDeps {
  logger?: Logger;
  /** A NATS connection to use (not closed by stop()); by default the worker connects to NATS_URL. */
  nc?: NatsConnection;
  faults?: WorkerFaults;
}

export interface Worker {
  readonly workerId: string;
  /** Base URL of /metrics, /_health, /_ready. */
  readonly statusUrl: string;
  readonly metrics: WorkerMetrics;
  ownedShards(): number[];
  ready(): boolean;
  /** Ordered and idempotent: leave the cluster, finish and commit batches in flight, free leases, drain NATS, close Postgres. */
  stop(): Promise<void>;
}

export async function startWorker(config: WorkerConfig, deps: WorkerDeps = {}): Promise<Worker> {
  const workerId = config.workerId || defaultWorkerId();
  const logger = (deps.logger ?? createLogger('worker')).child({ workerId });
  const metrics = createWorkerMetrics();
  let stage = 'starting';
  let coordinator: ShardCoordinator | undefined;
  let stopping = false;

  const status = await startStatusServer(config.metricsHost, config.metricsPort, metrics.registry, () => ({
    ready: stage === 'running' && !stopping && coordinator?.joinedCluster === true,
    detail: { stage, shards: coordinator?.ownedShards() ?? [] },
  }));
  logger.info({ url: status.url }, 'status server listening');

  const ownNats = deps.nc === undefined;
  const nc = deps.nc ?? (await connectNats(config.natsUrl, `spate-worker-${workerId}`));
  const cleanups: (() => Promise<void>)[] = [];
  const fail = async (err: unknown): Promise<never> => {
    for (const c of cleanups.reverse()) await c().catch(() => undefined);
    if (ownNats) await nc.close().catch(() => undefined);
    await status.close();
    throw err;
  };

  try {
    stage = 'checking cluster settings';
    await ensureClusterSettings(nc, { shardCount: config.shardCount }, config.natsReplicas, logger);
    const jsm = await retryUnanswered('jetstream manager', () => jetstreamManager(nc), logger);
    stage = 'waiting for streams';
    for (let attempt = 0; !(await streamsPresent(jsm)); attempt++) {
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

    const pool = createPool(config.databaseUrl, config.dbPoolSize, logger);
    cleanups.push(() => pool.end());
    const groupPool = createPool(config.databaseUrl, 2, logger);
    cleanups.push(() => groupPool.end());
    const dedup = new DedupGenerations(config.dedupWindow);
    const reportUpkeep = ({ dropped, failed }: DedupUpkeep) => {
      if (dropped.length > 0) logger.info({ dropped }, 'expired dedup generations dropped');
      if (failed.length > 0) logger.warn({ failed }, 'expired dedup generations not dropped yet: trying again next time');
    };
    reportUpkeep(await dedup.maintain(pool));
    let upkeep: Promise<unknown> | undefined;
    let pruning: Promise<unknown> | undefined;
    const maintenance = setInterval(() => {
      // One run of each at a time: a detach waits for the batches in flight.
      upkeep ??= dedup
        .maintain(pool)
        .then(reportUpkeep, (err: unknown) => logger.warn({ err: errorText(err) }, 'dedup maintenance failed'))
        .finally(() => (upkeep = undefined));
      // A large backlog of warnings is worked off over several ticks.
      pruning ??= pruneWarnings(pool, config.warningRetention)
        .then(
          (deleted) => deleted > 0 && logger.info({ deleted }, 'expired ingestion warnings deleted'),
          (err: unknown) => logger.warn({ err: errorText(err) }, 'ingestion warning pruning failed'),
        )
        .finally(() => (pruning = undefined));
    }, Math.min(60_000, Math.max(1_000, Math.floor(config.dedupWindow / 4))));
    maintenance.unref();
    cleanups.push(() => Promise.resolve(clearInterval(maintenance)));

    const batchSlots = pLimit(config.batchConcurrency);
    metrics.trackBatchSlots(() => ({ active: batchSlots.activeCount, waiting: batchSlots.pendingCount }));
    const ctx: PartitionContext = {
      js: jetstream(nc),
      jsm,
      pool,
      cache: new PersonCache(config.personCacheSize),
      groupTypes: new GroupTypeRegistry(),
      groupWriter: new GroupWriter(groupPool),
      dedup,
      metrics,
      logger,
      workerId,
      limits: {
        maxEvents: config.batchMaxEvents,
        maxBytes: config.batchMaxBytes,
        fetchMaxBytes: config.fetchMaxBytes,
        publishPartBytes: config.publishPartBytes,
      },
      batchSlots,
      maxPayload: () => nc.info?.max_payload ?? 1024 * 1024,
      faults: deps.faults,
    };

    stage = 'joining';
    const bucket = await retryUnanswered('workers bucket', () => openWorkersBucket(nc, config.leaseTtl, config.natsReplicas, logger), logger);
    coordinator = new ShardCoordinator(
      bucket.kv,
      { workerId, shardCount: config.shardCount, ttlMs: bucket.ttlMs, replicas: config.natsReplicas },
      (lease, lost) => {
        const processors = CONSUMED_STREAMS.map(
          (kind) => new PartitionProcessor(kind, lease.shard, ctx, () => Date.now() < lease.deadline, lost),
        );
        for (const p of processors) p.start();
        return { stop: async () => void (await Promise.all(processors.map((p) => p.stop()))) };
      },
      logger,
      metrics,
    );
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
      if (ownNats) await nc.drain().catch(() => undefined);
      for (const c of cleanups.reverse()) await c().catch((err: unknown) => logger.warn({ err: errorText(err) }, 'cleanup failed'));
      await status.close();
      stage = 'stopped';
      logger.info('stopped');
    })());

  return {
    workerId,
    statusUrl: status.url,
    metrics,
    ownedShards: () => coordinator?.ownedShards() ?? [],
    ready: () => stage === 'running' && !stopping,
    stop,
  };
}

// The persons role: every owned shard's EVENTS, HISTORICAL and OVERFLOW read in order, person,
// alias and group processing, PROCESSED written exactly once in effect (docs/workers.md).
import type { JetStreamClient, JetStreamManager } from '@nats-io/jetstream';
import type { Logger, Registry, StreamKind, StreamLayout } from '../../lib/index.js';
import { createPool, errorText, type EventHooks, type ShardLease, type ShardRunner } from '../coordination/index.js';
import { processBatches } from './batch-transaction.js';
import { BatchTurns } from './batch-turns.js';
import { DedupGenerations, type DedupUpkeep } from './dedup.js';
import { GroupTypeRegistry } from './group-types.js';
import { GroupWriter } from './group-writer.js';
import { createPersonMetrics } from './metrics.js';
import type { BatchLimits, PartitionContext, WorkerFaults } from './partition-context.js';
import { PartitionRunner } from './partition-runner.js';
import { PersonCache } from './person-cache.js';
import { pruneWarnings } from './warnings.js';

export { personUuidFor } from './person-workspace.js';
export type { WorkerFaults } from './partition-context.js';
export { WARNING_TYPES, type WarningType } from './warnings.js';

/** Streams the persons role consumes per owned shard; PROCESSED is its output. */
export const CONSUMED_STREAMS: readonly StreamKind[] = ['events', 'historical', 'overflow'];

export interface PersonsOptions {
  workerId: string;
  databaseUrl: string;
  /** PostgreSQL connections for batches (two more write groups). */
  dbPoolSize: number;
  batchConcurrency: number;
  limits: BatchLimits;
  personCacheSize: number;
  dedupWindow: number;
  warningRetention: number;
  /** Which stream holds each shard (STREAM_PARTITIONS). */
  layout: StreamLayout;
}

export interface PersonsDeps {
  js: JetStreamClient;
  jsm: JetStreamManager;
  registry: Registry;
  logger: Logger;
  maxPayload: () => number;
  hooks: EventHooks;
  faults?: WorkerFaults;
}

export interface PersonsRole {
  /** Starts processing an owned shard (its three streams) until the runner is stopped or the shard is lost. */
  runShard(lease: ShardLease, lost: (reason: string) => void): ShardRunner;
  /** Ends maintenance and closes the pools; call after every shard runner stopped. */
  stop(): Promise<void>;
}

export async function startPersons(options: PersonsOptions, deps: PersonsDeps): Promise<PersonsRole> {
  const { logger } = deps;
  const metrics = createPersonMetrics(deps.registry);
  const pool = createPool(options.databaseUrl, options.dbPoolSize, logger);
  const groupPool = createPool(options.databaseUrl, 2, logger);
  const closePools = async () => {
    await groupPool.end().catch((err: unknown) => logger.warn({ err: errorText(err) }, 'closing the group pool failed'));
    await pool.end().catch((err: unknown) => logger.warn({ err: errorText(err) }, 'closing the batch pool failed'));
  };

  const dedup = new DedupGenerations(options.dedupWindow);
  const reportUpkeep = ({ dropped, failed }: DedupUpkeep) => {
    if (dropped.length > 0) logger.info({ dropped }, 'expired dedup generations dropped');
    if (failed.length > 0) logger.warn({ failed }, 'expired dedup generations not dropped yet: trying again next time');
  };
  try {
    reportUpkeep(await dedup.maintain(pool));
  } catch (err) {
    await closePools();
    throw err;
  }
  let upkeep: Promise<unknown> | undefined;
  let pruning: Promise<unknown> | undefined;
  const maintenance = setInterval(() => {
    // One run of each at a time: a detach waits for the batches in flight.
    upkeep ??= dedup
      .maintain(pool)
      .then(reportUpkeep, (err: unknown) => logger.warn({ err: errorText(err) }, 'dedup maintenance failed'))
      .finally(() => (upkeep = undefined));
    // A large backlog of warnings is worked off over several ticks.
    pruning ??= pruneWarnings(pool, options.warningRetention)
      .then(
        (deleted) => deleted > 0 && logger.info({ deleted }, 'expired ingestion warnings deleted'),
        (err: unknown) => logger.warn({ err: errorText(err) }, 'ingestion warning pruning failed'),
      )
      .finally(() => (pruning = undefined));
  }, Math.min(60_000, Math.max(1_000, Math.floor(options.dedupWindow / 4))));
  maintenance.unref();

  const turns = new BatchTurns({
    concurrency: options.batchConcurrency,
    shareBelowEvents: Math.max(1, Math.floor(options.limits.maxEvents / 4)),
    // Without lingering (WORKER_BATCH_LINGER=0) batches are not held back to be shared either.
    share: options.limits.lingerMs > 0,
    together: (units) => processBatches(ctx, units),
  });
  metrics.trackBatchSlots(() => ({ active: turns.activeCount, waiting: turns.pendingCount }));
  const ctx: PartitionContext = {
    js: deps.js,
    jsm: deps.jsm,
    pool,
    cache: new PersonCache(options.personCacheSize),
    groupTypes: new GroupTypeRegistry(),
    groupWriter: new GroupWriter(groupPool, options.limits.maxPropertiesBytes),
    dedup,
    metrics,
    logger,
    workerId: options.workerId,
    limits: options.limits,
    layout: options.layout,
    turns,
    hooks: deps.hooks,
    maxPayload: deps.maxPayload,
    faults: deps.faults,
  };

  return {
    runShard(lease, lost) {
      const runners = CONSUMED_STREAMS.map((kind) => new PartitionRunner(kind, lease.shard, ctx, () => Date.now() < lease.deadline, lost));
      for (const r of runners) r.start();
      return { stop: async () => void (await Promise.all(runners.map((r) => r.stop()))) };
    },
    async stop() {
      clearInterval(maintenance);
      await closePools();
    },
  };
}

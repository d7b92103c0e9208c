// What every partition of the persons role shares: connections, caches, limits, metrics.
import type { JetStreamClient, JetStreamManager } from '@nats-io/jetstream';
import type pg from 'pg';
import type { Logger, StreamLayout } from '../../lib/index.js';
import type { EventHooks } from '../coordination/index.js';
import type { BatchTurns } from './batch-turns.js';
import type { DedupGenerations } from './dedup.js';
import type { GroupTypeRegistry } from './group-types.js';
import type { GroupWriter } from './group-writer.js';
import type { PersonMetrics } from './metrics.js';
import type { PersonCache } from './person-cache.js';

export interface BatchLimits {
  maxEvents: number;
  maxBytes: number;
  /** How long a batch that does not fill the limits waits for more after its first message arrived (ms). */
  lingerMs: number;
  fetchMaxBytes: number;
  publishPartBytes: number;
  /** Largest person or group properties stored, in bytes of JSON (WORKER_MAX_PROPERTIES_BYTES). */
  maxPropertiesBytes: number;
}

/** Test hooks: let a test crash a worker at the worst moment. */
export interface WorkerFaults {
  /** Runs after a batch is published and before it commits. */
  afterPublish?: (info: { stream: string; shard: number; first: number; last: number }) => Promise<void> | void;
}

export interface PartitionContext {
  js: JetStreamClient;
  jsm: JetStreamManager;
  pool: pg.Pool;
  cache: PersonCache;
  groupTypes: GroupTypeRegistry;
  groupWriter: GroupWriter;
  dedup: DedupGenerations;
  metrics: PersonMetrics;
  logger: Logger;
  workerId: string;
  limits: BatchLimits;
  /** Which stream holds each shard (STREAM_PARTITIONS). */
  layout: StreamLayout;
  /**
   * Turns for batches, shared by all of a worker's partitions (WORKER_BATCH_CONCURRENCY): only
   * batches with a turn are taken from their shard's buffer and parsed, so few batches' events are
   * in memory at once.
   */
  turns: BatchTurns;
  /** Run on each batch's events before person processing (transformations). */
  hooks: EventHooks;
  maxPayload: () => number;
  faults?: WorkerFaults;
}

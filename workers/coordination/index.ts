// What the worker's roles share (docs/workers.md): leases and membership in the `spate-workers`
// bucket, where each (stream, shard) stands in PostgreSQL and the fence that guards it, the
// PostgreSQL pool and which failures are worth waiting out, the status server and the metrics
// registry. Roles import this entry, never the files behind it, and never each other.
export { assignBalanced, assignShards } from './assignment.js';
export { beginBatch, createPool, isConflictDbError, isTransientDbError, plainArrayLiteral } from './db.js';
export { errorText, isDeterministicFailure, isNatsUnavailable, OwnershipLostError } from './failures.js';
export {
  LeaseCoordinator,
  openWorkersBucket,
  SHARD_LEASES,
  ShardCoordinator,
  shardLeases,
  WORKERS_BUCKET,
  type Lease,
  type LeaseRunner,
  type LeaseSet,
  type ShardLease,
  type ShardRunner,
} from './lease-coordinator.js';
export { egressPolicy, type EgressErrors, type EgressPolicy } from './egress.js';
export { followBucket, type BucketHandlers } from './kv-follow.js';
export { EventHooks, HookedEventTooLargeError, type BeforePersonsHook, type HookBatch, type HookedEvent } from './event-hooks.js';
export { createCoordinationMetrics, createWorkerRegistry, type CoordinationMetrics } from './metrics.js';
export { committedPositions, lockPosition, lockPositions, planBatch, planBatches, PositionMovedError, takeOverPartition, type BatchPlan, type PartitionStart, type PositionClaim } from './positions.js';
export { startStatusServer, type StatusServer } from './status-server.js';

// The exports role (docs/exports.md): batch exports run by the workers. Each export is a lease
// of the set `export` (one holder in the cluster, moved on a crash like a shard); its holder
// runs its scheduled intervals and backfills one at a time and reports them to the admin
// server. The exports come from the KV bucket spate-batch-exports.
import { randomUUID } from 'node:crypto';
import pLimit from 'p-limit';
import type { JetStreamClient, JetStreamManager } from '@nats-io/jetstream';
import type { BatchExportRecord, Logger, NatsConnection, Registry } from '../../lib/index.js';
import { createPool, type LeaseCoordinator } from '../coordination/index.js';
import { ExportCatalog } from './catalog.js';
import { egressPolicy } from './egress.js';
import { startExportRunner, type ExportFaults, type ExportSettings } from './export-runner.js';
import { createExportMetrics } from './metrics.js';
import { shiftedClock, type ExportClock } from './plan.js';
import { ProcessedStream } from './processed-stream.js';

export { egressPolicy, type EgressPolicy } from './egress.js';
export { alignedStart, dueIntervals } from './schedule.js';
export { shiftedClock, type ExportClock } from './plan.js';
export type { ExportFaults, ExportSettings } from './export-runner.js';

/** Lease set of the exports role: `export.<batch export id>` in spate-workers. */
export const EXPORT_LEASES = 'export';

export interface ExportsOptions extends ExportSettings {
  workerId: string;
  databaseUrl: string;
  dbPoolSize: number;
  natsReplicas: number;
  /** EXPORT_EGRESS_ALLOW: loopback, private, CIDR ranges. */
  egressAllow: string;
  /** Bytes a run's PROCESSED reader pulls at once (its memory bound). */
  readBytes: number;
  /** Runs delivered at once by this worker. */
  concurrency: number;
}

export interface ExportsDeps {
  nc: NatsConnection;
  js: JetStreamClient;
  jsm: JetStreamManager;
  registry: Registry;
  logger: Logger;
  coordinator: LeaseCoordinator;
  /** The runner's clock (tests shift it); real time by default. */
  clock?: ExportClock;
  faults?: ExportFaults;
}

export interface ExportsRole {
  /** Exports whose lease this worker holds. */
  held(): string[];
  stop(): Promise<void>;
}

/**
 * The destination config as the runner uses it. Secrets are read as the KV record holds them;
 * where they are encrypted at rest, this is the one place that decrypts them (and only when
 * a run connects).
 */
function destinationConfig(record: BatchExportRecord): Record<string, unknown> {
  return record.destination.config;
}

export async function startExports(options: ExportsOptions, deps: ExportsDeps): Promise<ExportsRole> {
  const logger = deps.logger.child({ role: 'exports' });
  const egress = egressPolicy(options.egressAllow);
  const catalog = await ExportCatalog.open(deps.nc, options.natsReplicas, logger);
  const db = createPool(options.databaseUrl, options.dbPoolSize, logger);
  const lastCompletedEnd = new Map<string, number>();
  const held = new Set<string>();
  const metrics = createExportMetrics(deps.registry, () =>
    [...held].flatMap((exportId) => {
      const end = lastCompletedEnd.get(exportId);
      return end === undefined ? [] : [{ exportId, seconds: Math.max(0, (Date.now() - end) / 1000) }];
    }),
  );
  const runnerDeps = {
    db,
    js: deps.js,
    stream: new ProcessedStream(deps.js, deps.jsm, options.readBytes),
    catalog,
    clock: deps.clock ?? shiftedClock(0),
    egress,
    settings: options,
    metrics,
    logger,
    workerId: options.workerId,
    instanceId: `${options.workerId}:${randomUUID().slice(0, 8)}`,
    destinationConfig,
    lastCompletedEnd,
    faults: deps.faults,
    turns: pLimit(options.concurrency),
  };
  deps.coordinator.addLeaseSet({
    set: EXPORT_LEASES,
    names: () => catalog.ids(),
    start(lease, lost) {
      held.add(lease.name);
      metrics.owned.set(held.size);
      const runner = startExportRunner(lease, lost, runnerDeps);
      return {
        stop: async () => {
          await runner.stop();
          held.delete(lease.name);
          lastCompletedEnd.delete(lease.name);
          metrics.owned.set(held.size);
        },
      };
    },
  });
  // A new or deleted export is leased or released at once, not at the next renewal.
  const unsubscribe = catalog.onChange(() => deps.coordinator.refresh());
  logger.info({ egress: egress.description }, 'exports role started');
  return {
    held: () => [...held].sort(),
    stop: async () => {
      unsubscribe();
      catalog.stop();
      await db.end().catch(() => undefined);
    },
  };
}

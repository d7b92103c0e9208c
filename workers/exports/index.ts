// The exports role (docs/exports.md): batch exports run by the workers. Each export is a lease
// of the set `export` (one holder in the cluster, moved on a crash like a shard); its holder
// runs its scheduled intervals and backfills one at a time and reports them to the admin
// server. The exports come from the KV bucket spate-batch-exports.
import { randomUUID } from 'node:crypto';
import pLimit from 'p-limit';
import type { JetStreamClient, JetStreamManager } from '@nats-io/jetstream';
import {
  decryptConfigSecrets,
  secretContext,
  SecretDecryptionError,
  type BatchExportRecord,
  type Logger,
  type NatsConnection,
  type Registry,
  type SecretKeyring,
  type StreamLayout,
} from '../../lib/index.js';
import { ExportError } from './errors.js';
import { createPool, type LeaseCoordinator } from '../coordination/index.js';
import { ExportCatalog } from './catalog.js';
import { exportEgressPolicy } from './egress.js';
import { startExportRunner, type ExportFaults, type ExportSettings } from './export-runner.js';
import { LinePool } from './formats/line-pool.js';
import { createExportMetrics } from './metrics.js';
import { shiftedClock, type ExportClock } from './plan.js';
import { ProcessedStream } from './processed-stream.js';
import { CaptureProgress } from './capture-progress.js';

export { exportEgressPolicy, type EgressPolicy } from './egress.js';
export { alignedStart, dueIntervals } from './schedule.js';
export { shiftedClock, type ExportClock } from './plan.js';
export type { ExportFaults, ExportSettings } from './export-runner.js';

/** Lease set of the exports role: `export.<batch export id>` in spate-workers. */
export const EXPORT_LEASES = 'export';

export interface ExportsOptions extends ExportSettings {
  workerId: string;
  databaseUrl: string;
  dbPoolSize: number;
  /** EXPORT_EGRESS_ALLOW: loopback, private, CIDR ranges. */
  egressAllow: string;
  /** Bytes a run's PROCESSED reader pulls at once (its memory bound). */
  readBytes: number;
  /** Runs delivered at once by this worker. */
  concurrency: number;
  /** EXPORT_FORMAT_THREADS. */
  formatThreads: number;
  /** SPATE_SECRET_KEY (and previous keys): decrypts the destinations' secrets. */
  keyring: SecretKeyring;
}

export interface ExportsDeps {
  nc: NatsConnection;
  js: JetStreamClient;
  jsm: JetStreamManager;
  registry: Registry;
  logger: Logger;
  coordinator: LeaseCoordinator;
  /** The capture streams' layout (which streams and shards a backfill waits for). */
  layout: StreamLayout;
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
 * The destination config as a run uses it: the admin server stores secret fields encrypted
 * (docs/security.md, "Secrets at rest"); they are decrypted here, only when a run connects, and
 * live only in that run's destination client.
 */
function destinationConfig(keyring: SecretKeyring) {
  return (record: BatchExportRecord): Record<string, unknown> => {
    try {
      return decryptConfigSecrets(record.destination.config, keyring, (field) => secretContext('batch_export', record.team_id, field));
    } catch (err) {
      if (err instanceof SecretDecryptionError) {
        throw new ExportError('invalid_config', `the destination's secrets do not decrypt (${err.code}): ${err.message}`, { cause: err });
      }
      throw err;
    }
  };
}

export function startExports(options: ExportsOptions, deps: ExportsDeps): ExportsRole {
  const logger = deps.logger.child({ role: 'exports' });
  const egress = exportEgressPolicy(options.egressAllow);
  const catalog = ExportCatalog.open(deps.nc, logger);
  const db = createPool(options.databaseUrl, options.dbPoolSize, logger);
  const lastCompletedEnd = new Map<string, number>();
  const held = new Set<string>();
  const metrics = createExportMetrics(deps.registry, () =>
    [...held].flatMap((exportId) => {
      const end = lastCompletedEnd.get(exportId);
      return end === undefined ? [] : [{ exportId, seconds: Math.max(0, (Date.now() - end) / 1000) }];
    }),
  );
  const lines = new LinePool(options.formatThreads);
  const runnerDeps = {
    db,
    js: deps.js,
    stream: new ProcessedStream(deps.js, deps.jsm, options.readBytes),
    progress: new CaptureProgress(deps.jsm, db, deps.layout),
    catalog,
    clock: deps.clock ?? shiftedClock(0),
    egress,
    settings: options,
    metrics,
    logger,
    workerId: options.workerId,
    instanceId: `${options.workerId}:${randomUUID().slice(0, 8)}`,
    destinationConfig: destinationConfig(options.keyring),
    lastCompletedEnd,
    faults: deps.faults,
    turns: pLimit(options.concurrency),
    lines,
  };
  deps.coordinator.addLeaseSet({
    set: EXPORT_LEASES,
    // Workers started with WORKER_EXPORTS=false hold none of them.
    optIn: true,
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
      await lines.close();
    },
  };
}

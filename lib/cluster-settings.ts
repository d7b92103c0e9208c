// The settings every process of a cluster must agree on, recorded by the first one to start in
// the spate-cluster KV bucket (key `settings`): the shard count, the stream partitions and (from
// ingest nodes) the stream limits. A process that disagrees is refused.
import { JetStreamApiCodes, JetStreamApiError } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import type { Logger } from './logger.js';
import { retryUnanswered } from './nats.js';
import type { StreamLayout, StreamLimits } from './streams.js';

/** KV bucket: cluster-wide settings that every deployable must agree on (shard count, stream partitions). */
export const CLUSTER_BUCKET = 'spate-cluster';

/**
 * The stream limits every ingest node must agree on: any node applies its own to the streams at
 * start, so one started with a stray STREAM_MAX_AGE (or fewer replicas) would change them for the
 * whole cluster. Durations in milliseconds.
 */
export interface ClusterStreamSettings {
  replicas: number;
  maxAgeMs: number;
  maxBytes: number;
  duplicateWindowMs: number;
  historicalDuplicateWindowMs: number;
  processedDuplicateWindowMs: number;
}

export interface ClusterSettings {
  shardCount: number;
  /** STREAM_PARTITIONS (streams.ts, StreamLayout); absent in records made before it existed, which is 1. */
  streamPartitions?: number;
  /** Recorded by the first ingest node (workers check only the shard count and the partitions). */
  streams?: ClusterStreamSettings;
}

/** The settings ensureClusterSettings checks: the shard count and partitions, and the stream limits when given. */
export interface WantedClusterSettings {
  shardCount: number;
  streamPartitions: number;
  streams?: ClusterStreamSettings;
  /**
   * Replace the recorded stream limits with these instead of refusing a difference: the way to
   * change retention on purpose (STREAM_LIMITS_UPDATE on an ingest node).
   */
  replaceStreams?: boolean;
}

/** The stream limits of a node's configuration, as the cluster settings record them. */
export function clusterStreamSettings(limits: StreamLimits): ClusterStreamSettings {
  return {
    replicas: limits.replicas,
    maxAgeMs: limits.maxAgeMs,
    maxBytes: limits.maxBytes,
    duplicateWindowMs: limits.duplicateWindowMs,
    historicalDuplicateWindowMs: limits.historicalDuplicateWindowMs ?? limits.duplicateWindowMs,
    processedDuplicateWindowMs: limits.processedDuplicateWindowMs ?? limits.duplicateWindowMs,
  };
}

/** The environment variable that sets each recorded stream limit on an ingest node. */
const STREAM_SETTING_ENV: Readonly<Record<keyof ClusterStreamSettings, string>> = {
  replicas: 'STREAM_REPLICAS',
  maxAgeMs: 'STREAM_MAX_AGE',
  maxBytes: 'STREAM_MAX_BYTES',
  duplicateWindowMs: 'STREAM_DUPLICATE_WINDOW',
  historicalDuplicateWindowMs: 'STREAM_HISTORICAL_DUPLICATE_WINDOW',
  processedDuplicateWindowMs: 'STREAM_PROCESSED_DUPLICATE_WINDOW',
};

/** A recorded value as the setting is written: 7d, 2m, 1500ms; sizes and counts as numbers. */
function showStreamSetting(key: keyof ClusterStreamSettings, value: number): string {
  if (key === 'replicas' || key === 'maxBytes') return String(value);
  const units: Array<[string, number]> = [['d', 86_400_000], ['h', 3_600_000], ['m', 60_000], ['s', 1_000]];
  const unit = units.find(([, ms]) => value > 0 && value % ms === 0);
  return unit ? `${value / unit[1]}${unit[0]}` : `${value}ms`;
}

/** What differs between the recorded stream limits and a node's, as "VAR is x here, y in the cluster". */
function streamDifferences(stored: ClusterStreamSettings, wanted: ClusterStreamSettings): string[] {
  return (Object.keys(STREAM_SETTING_ENV) as Array<keyof ClusterStreamSettings>)
    .filter((k) => stored[k] !== wanted[k])
    .map((k) => `${STREAM_SETTING_ENV[k]} is ${showStreamSetting(k, wanted[k])} here but ${showStreamSetting(k, stored[k])} in the cluster`);
}

export class ClusterSettingsMismatch extends Error {
  override name = 'ClusterSettingsMismatch';
}

/**
 * A write refused because the key or subject moved past the revision it named (KV create of an
 * existing key, update or delete of a stale revision). nats-server 2.11+ answers 10164 where the
 * server cannot tell the last sequence in a cluster.
 */
export function isWrongLastSequence(err: unknown): boolean {
  return (
    err instanceof JetStreamApiError &&
    (err.code === JetStreamApiCodes.StreamWrongLastSequence || err.code === JetStreamApiCodes.StreamWrongLastSequenceUnknown)
  );
}

/** The settings could not be read or recorded (the server refused, or did not answer in time). */
export class ClusterSettingsUnwritable extends Error {
  override name = 'ClusterSettingsUnwritable';
}

/** Reads and creates of the settings before giving up (another process may create or delete the key meanwhile). */
const CLUSTER_SETTINGS_ATTEMPTS = 3;

/**
 * Records the cluster's shard count and stream partitions (and, from ingest nodes, the stream
 * limits) the first time and refuses to start a process that disagrees with it: an ingest node
 * and a worker with different counts would strand shards (or read streams that do not exist), and
 * an ingest node with other stream limits would impose them on every stream when it applied its own.
 */
export async function ensureClusterSettings(
  nc: NatsConnection,
  wanted: WantedClusterSettings,
  replicas: number,
  logger: Logger,
): Promise<ClusterSettings> {
  for (let attempt = 1; ; attempt++) {
    try {
      // An unanswered create may have landed: the next try reads it.
      return await retryUnanswered('cluster settings', () => readOrRecordSettings(nc, wanted, replicas), logger);
    } catch (err) {
      if (err instanceof ClusterSettingsMismatch) throw err;
      // "The key exists" means another process created it first: read again. Any other refusal
      // would fail the same way again.
      if (!isWrongLastSequence(err) || attempt >= CLUSTER_SETTINGS_ATTEMPTS) {
        throw new ClusterSettingsUnwritable(
          `could not read or record the cluster settings in KV bucket ${CLUSTER_BUCKET} (key settings): ${err instanceof Error ? err.message : String(err)}`,
          { cause: err },
        );
      }
    }
  }
}

async function readOrRecordSettings(nc: NatsConnection, wanted: WantedClusterSettings, replicas: number): Promise<ClusterSettings> {
  const kv = await new Kvm(nc).create(CLUSTER_BUCKET, { history: 1, replicas });
  const record: ClusterSettings = { shardCount: wanted.shardCount, streamPartitions: wanted.streamPartitions, ...(wanted.streams ? { streams: wanted.streams } : {}) };
  const entry = await kv.get('settings');
  if (entry?.operation !== 'PUT') {
    await kv.create('settings', JSON.stringify(record));
    return record;
  }
  const stored = entry.json<ClusterSettings>();
  if (stored.shardCount !== wanted.shardCount) {
    throw new ClusterSettingsMismatch(
      `this cluster was created with ${stored.shardCount} shards but SHARD_COUNT is ${wanted.shardCount}; ` +
        `set SHARD_COUNT=${stored.shardCount} (changing it requires draining every stream)`,
    );
  }
  const storedPartitions = stored.streamPartitions ?? 1;
  if (storedPartitions !== wanted.streamPartitions) {
    throw new ClusterSettingsMismatch(
      `this cluster was created with ${storedPartitions} stream partition${storedPartitions === 1 ? '' : 's'} but STREAM_PARTITIONS is ${wanted.streamPartitions}; ` +
        `set STREAM_PARTITIONS=${storedPartitions} (the streams hold their shards by partition: changing it requires draining every stream)`,
    );
  }
  if (!wanted.streams) return stored;
  const differences = stored.streams ? streamDifferences(stored.streams, wanted.streams) : [];
  if (stored.streams && differences.length === 0) return stored;
  if (stored.streams && !wanted.replaceStreams) {
    throw new ClusterSettingsMismatch(
      `this node's stream limits differ from the cluster's (KV bucket ${CLUSTER_BUCKET}, key settings): ${differences.join('; ')}. ` +
        'Set the same values, or, to change the cluster on purpose, start one ingest node with the new values and STREAM_LIMITS_UPDATE=true, then the others with the new values',
    );
  }
  // First ingest node of a cluster whose record predates stream limits (or a worker made it),
  // or a deliberate change: record ours, unless someone else changed the record meanwhile.
  const updated = { ...stored, streams: wanted.streams };
  await kv.update('settings', JSON.stringify(updated), entry.revision);
  return updated;
}

/**
 * The recorded settings, creating nothing (for readers such as the admin server); undefined
 * before the first ingest node or worker recorded them.
 */
export async function readClusterSettings(nc: NatsConnection): Promise<ClusterSettings | undefined> {
  try {
    const entry = await (await new Kvm(nc).open(CLUSTER_BUCKET)).get('settings');
    return entry?.operation === 'PUT' ? entry.json<ClusterSettings>() : undefined;
  } catch (err) {
    // No bucket yet (StreamNotFoundError is one of these).
    if (err instanceof JetStreamApiError && err.status === 404) return undefined;
    throw err;
  }
}

/** The stream layout recorded settings describe. */
export function recordedStreamLayout(settings: ClusterSettings): StreamLayout {
  return { shardCount: settings.shardCount, partitions: settings.streamPartitions ?? 1 };
}

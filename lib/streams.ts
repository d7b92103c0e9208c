// JetStream streams, subjects and KV buckets: public contracts (ARCHITECTURE.md).
import {
  DiscardPolicy,
  JetStreamApiCodes,
  JetStreamApiError,
  RetentionPolicy,
  StorageType,
  type JetStreamManager,
  type StreamConfig,
} from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import type { Logger } from './logger.js';
import { retryUnanswered } from './nats.js';

export const STREAMS = {
  events: 'EVENTS',
  historical: 'HISTORICAL',
  overflow: 'OVERFLOW',
  processed: 'PROCESSED',
} as const;

export type StreamKind = keyof typeof STREAMS;

/** Subject prefix of each stream: `<prefix>.<projectId>.<shard>`. */
export const SUBJECT_PREFIX: Readonly<Record<StreamKind, string>> = {
  events: 'events',
  historical: 'historical',
  overflow: 'overflow',
  processed: 'processed',
};

export function subjectFor(kind: StreamKind, projectId: number, shard: number): string {
  return `${SUBJECT_PREFIX[kind]}.${projectId}.${shard}`;
}

/** Every project's messages of one shard: `<prefix>.*.<shard>` (one filter subject; nats-server 2.9). */
export function shardFilter(kind: StreamKind, shard: number): string {
  return `${SUBJECT_PREFIX[kind]}.*.${shard}`;
}

/** Parses `<prefix>.<projectId>.<shard>`; undefined when the subject is not one of ours. */
export function parseSubject(subject: string): { kind: StreamKind; projectId: number; shard: number } | undefined {
  const parts = subject.split('.');
  if (parts.length !== 3) return undefined;
  const kind = (Object.keys(SUBJECT_PREFIX) as StreamKind[]).find((k) => SUBJECT_PREFIX[k] === parts[0]);
  const projectId = Number(parts[1]);
  const shard = Number(parts[2]);
  if (!kind || !Number.isInteger(projectId) || !Number.isInteger(shard)) return undefined;
  return { kind, projectId, shard };
}

/** KV bucket: project API key → { projectId, organizationId, limits? }. Written by admin, watched by ingest. */
export const PROJECTS_BUCKET = 'spate-projects';
/** KV bucket: cluster-wide settings that every deployable must agree on (shard count). */
export const CLUSTER_BUCKET = 'spate-cluster';

/**
 * What one ingest node lets a project send (each absent: no limit). The admin server writes the
 * limits that apply (the project's own, or the cluster default), so ingest nodes only enforce.
 */
export interface ProjectLimits {
  /** Realtime events per second; past it, 429 with Retry-After. */
  eventsPerSecond?: number;
  /** Events per UTC day; past it, events are dropped with 200 (PostHog's billing-quota answer). */
  eventsPerDay?: number;
  /** HISTORICAL messages per second (one per shard of a request, at most PUBLISH_MAX_MESSAGE_BYTES); past it, 429. */
  historicalMessagesPerSecond?: number;
}

export interface ProjectRecord {
  projectId: number;
  organizationId: string;
  /** Absent when the project has no limit at all. */
  limits?: ProjectLimits;
}

export interface StreamLimits {
  /** Replicas per stream: 1 locally, 3 on a 3-node cluster. */
  replicas: number;
  /** JetStream de-duplication window for Nats-Msg-Id, in milliseconds. */
  duplicateWindowMs: number;
  /**
   * PROCESSED's window: a worker that published a batch but could not commit it republishes it
   * under the same ids until it can, so this bounds how long such an outage stays duplicate-free.
   */
  processedDuplicateWindowMs?: number;
  /**
   * HISTORICAL's window: historical messages carry ids derived from their events, so a batch sent
   * again (an importer resuming after a crash) within it is stored once.
   */
  historicalDuplicateWindowMs?: number;
  /** Messages older than this are removed, in milliseconds; 0 keeps them forever. */
  maxAgeMs: number;
  /** Bytes per stream; -1 is unlimited (bounded by the server's JetStream storage). */
  maxBytes: number;
}

const MS_TO_NANOS = 1_000_000;

export function streamConfig(kind: StreamKind, limits: StreamLimits): Partial<StreamConfig> & { name: string } {
  return {
    name: STREAMS[kind],
    subjects: [`${SUBJECT_PREFIX[kind]}.>`],
    storage: StorageType.File,
    retention: RetentionPolicy.Limits,
    // When a limit is hit, refuse new messages (the publisher answers 503) rather than
    // silently deleting acknowledged ones that workers may not have processed yet.
    discard: DiscardPolicy.New,
    num_replicas: limits.replicas,
    duplicate_window: duplicateWindowMs(kind, limits) * MS_TO_NANOS,
    max_age: limits.maxAgeMs * MS_TO_NANOS,
    max_bytes: limits.maxBytes,
  };
}

function duplicateWindowMs(kind: StreamKind, limits: StreamLimits): number {
  if (kind === 'processed') return limits.processedDuplicateWindowMs ?? limits.duplicateWindowMs;
  if (kind === 'historical') return limits.historicalDuplicateWindowMs ?? limits.duplicateWindowMs;
  return limits.duplicateWindowMs;
}

/** Creates or updates the four streams so their configuration matches `limits`. Idempotent. */
export async function ensureStreams(jsm: JetStreamManager, limits: StreamLimits): Promise<void> {
  for (const kind of Object.keys(STREAMS) as StreamKind[]) {
    const config = streamConfig(kind, limits);
    try {
      const info = await jsm.streams.info(config.name);
      const current = info.config;
      const differs =
        current.num_replicas !== config.num_replicas ||
        current.duplicate_window !== config.duplicate_window ||
        current.max_age !== config.max_age ||
        current.max_bytes !== config.max_bytes ||
        current.discard !== config.discard;
      if (differs) await jsm.streams.update(config.name, { ...current, ...config });
    } catch (err) {
      if (!(err instanceof JetStreamApiError) || err.status !== 404) throw err;
      await jsm.streams.add(config);
    }
  }
}

/**
 * False when a stream is missing; undefined when the server did not answer (a transient
 * state that says nothing about the streams themselves).
 */
export async function streamsPresent(jsm: JetStreamManager): Promise<boolean | undefined> {
  try {
    for (const name of Object.values(STREAMS)) await jsm.streams.info(name);
    return true;
  } catch (err) {
    if (err instanceof JetStreamApiError && err.status === 404) return false;
    return undefined;
  }
}

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
  /** Recorded by the first ingest node (workers check only the shard count). */
  streams?: ClusterStreamSettings;
}

/** The settings ensureClusterSettings checks: the shard count, and the stream limits when given. */
export interface WantedClusterSettings {
  shardCount: number;
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
 * Records the cluster's shard count (and, from ingest nodes, the stream limits) the first time
 * and refuses to start a process that disagrees with it: an ingest node and a worker with
 * different counts would strand shards, and an ingest node with other stream limits would
 * impose them on every stream when it applied its own.
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
  const record: ClusterSettings = { shardCount: wanted.shardCount, ...(wanted.streams ? { streams: wanted.streams } : {}) };
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

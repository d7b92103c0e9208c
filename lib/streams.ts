// JetStream streams and subjects, and how the capture streams are partitioned: public contracts
// (ARCHITECTURE.md, docs/architecture.md).
import { DiscardPolicy, JetStreamApiError, RetentionPolicy, StorageType, type JetStreamManager, type StreamConfig } from '@nats-io/jetstream';
import { z } from 'zod';
import { ConfigError, setting } from './config.js';

/**
 * Each kind's stream name; with STREAM_PARTITIONS = K > 1 the partitioned kinds are K streams
 * named after it (partitionStreamName): name streams through streamOfShard and streamNamesOf.
 */
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

/**
 * How the capture streams are split (docs/architecture.md, "Partitioned streams"). One stream's
 * writes all go through its leader, so one EVENTS caps the cluster's write rate at one NATS
 * node's; with `partitions` = K > 1, EVENTS, HISTORICAL and OVERFLOW are each K streams that hold
 * contiguous ranges of shards, their leaders spread over the NATS nodes. Fixed at the cluster's
 * first start, like the shard count (cluster-settings.ts).
 */
export interface StreamLayout {
  shardCount: number;
  /** Streams per partitioned kind (STREAM_PARTITIONS); 1 keeps the single streams EVENTS, HISTORICAL, OVERFLOW. */
  partitions: number;
}

/**
 * The kinds K > 1 splits: ingest writes them, one small message per request and shard, so their
 * message rate is the capture rate. PROCESSED stays one stream: workers write it in batches
 * (thousands of events a message), and exports read a project's events from it as one range of
 * sequences.
 */
export const PARTITIONED_KINDS: readonly StreamKind[] = ['events', 'historical', 'overflow'];

/** Most partitions per kind: the shipped NATS users (deploy/nats/auth.conf) name this many. */
export const MAX_STREAM_PARTITIONS = 16;

/** The default: single streams (EVENTS, HISTORICAL, OVERFLOW, PROCESSED) and SHARD_COUNT's default of 16 shards. */
export const DEFAULT_STREAM_LAYOUT: StreamLayout = Object.freeze({ shardCount: 16, partitions: 1 });

/** Why a layout cannot be used: named after the setting to change. */
export class StreamLayoutError extends Error {
  override name = 'StreamLayoutError';
}

/** A checked layout: 1 ≤ partitions ≤ min(MAX_STREAM_PARTITIONS, shardCount). */
export function streamLayout(shardCount: number, partitions: number): StreamLayout {
  if (!Number.isInteger(partitions) || partitions < 1 || partitions > MAX_STREAM_PARTITIONS) {
    throw new StreamLayoutError(`STREAM_PARTITIONS must be an integer from 1 to ${MAX_STREAM_PARTITIONS} (got ${partitions})`);
  }
  if (partitions > shardCount) {
    throw new StreamLayoutError(`STREAM_PARTITIONS (${partitions}) cannot exceed SHARD_COUNT (${shardCount}): each stream holds at least one shard`);
  }
  return { shardCount, partitions };
}

/** STREAM_PARTITIONS: a setting of ingest nodes and workers, which must match the cluster's (cluster-settings.ts). */
export function streamPartitionsSettings() {
  return {
    streamPartitions: setting(
      'STREAM_PARTITIONS',
      z.coerce.number().int().min(1).max(MAX_STREAM_PARTITIONS).default(1),
      `streams EVENTS, HISTORICAL and OVERFLOW are each split into, by shard range (EVENTS_0 … EVENTS_<K-1>), so their writes spread over K stream leaders on the NATS nodes; 1 keeps single streams. At most SHARD_COUNT and ${MAX_STREAM_PARTITIONS}; fixed at the cluster's first start (checked in the spate-cluster KV bucket)`,
    ),
  };
}

/** The layout of a configuration; a ConfigError naming STREAM_PARTITIONS when it cannot be used. */
export function configuredStreamLayout(config: { shardCount: number; streamPartitions: number }): StreamLayout {
  try {
    return streamLayout(config.shardCount, config.streamPartitions);
  } catch (err) {
    if (err instanceof StreamLayoutError) throw new ConfigError([err.message], { cause: err });
    throw err;
  }
}

/** Partitions of `kind` in `layout`: K for the partitioned kinds, else 1. */
export function partitionsOf(kind: StreamKind, layout: StreamLayout): number {
  return layout.partitions > 1 && PARTITIONED_KINDS.includes(kind) ? layout.partitions : 1;
}

/** The partition holding `shard`: floor(shard · K / shardCount), so each holds a contiguous range. */
export function partitionOfShard(kind: StreamKind, shard: number, layout: StreamLayout): number {
  return Math.floor((shard * partitionsOf(kind, layout)) / layout.shardCount);
}

/** The shards partition `p` holds: [first, last]. */
export function shardsOfPartition(kind: StreamKind, p: number, layout: StreamLayout): { first: number; last: number } {
  const k = partitionsOf(kind, layout);
  return { first: Math.ceil((p * layout.shardCount) / k), last: Math.ceil(((p + 1) * layout.shardCount) / k) - 1 };
}

/** Stream name of partition `p`: `EVENTS` when the kind is not split, `EVENTS_<p>` (p from 0) when it is. */
export function partitionStreamName(kind: StreamKind, p: number, layout: StreamLayout): string {
  return partitionsOf(kind, layout) === 1 ? STREAMS[kind] : `${STREAMS[kind]}_${p}`;
}

/** The stream that stores `<prefix>.<projectId>.<shard>`. */
export function streamOfShard(kind: StreamKind, shard: number, layout: StreamLayout): string {
  return partitionStreamName(kind, partitionOfShard(kind, shard, layout), layout);
}

/** Every stream of `kind`, by partition. */
export function streamNamesOf(kind: StreamKind, layout: StreamLayout): string[] {
  return Array.from({ length: partitionsOf(kind, layout) }, (_, p) => partitionStreamName(kind, p, layout));
}

/** Every stream of the layout: each kind's partitions, kind by kind. */
export function allStreamNames(layout: StreamLayout): string[] {
  return (Object.keys(STREAMS) as StreamKind[]).flatMap((kind) => streamNamesOf(kind, layout));
}

/** The configuration of partition `p` of `kind`. K = 1 gives exactly the single streams' configuration. */
export function streamConfig(kind: StreamKind, limits: StreamLimits, layout: StreamLayout, p = 0): Partial<StreamConfig> & { name: string } {
  const k = partitionsOf(kind, layout);
  const prefix = SUBJECT_PREFIX[kind];
  const { first, last } = shardsOfPartition(kind, p, layout);
  return {
    name: partitionStreamName(kind, p, layout),
    subjects: k === 1 ? [`${prefix}.>`] : Array.from({ length: last - first + 1 }, (_, i) => `${prefix}.*.${first + i}`),
    ...(k === 1 ? {} : { description: `${prefix} of shards ${first}-${last} (partition ${p} of ${k})` }),
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

/** Every stream's configuration in `layout`. */
export function streamConfigs(limits: StreamLimits, layout: StreamLayout): Array<Partial<StreamConfig> & { name: string }> {
  return (Object.keys(STREAMS) as StreamKind[]).flatMap((kind) => Array.from({ length: partitionsOf(kind, layout) }, (_, p) => streamConfig(kind, limits, layout, p)));
}

/**
 * Creates or updates the streams of `layout` so their configuration matches `limits`. Idempotent.
 * STREAM_MAX_BYTES bounds each stream, so each partition (not each kind).
 */
export async function ensureStreams(jsm: JetStreamManager, limits: StreamLimits, layout: StreamLayout): Promise<void> {
  for (const config of streamConfigs(limits, layout)) {
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
export async function streamsPresent(jsm: JetStreamManager, layout: StreamLayout): Promise<boolean | undefined> {
  try {
    for (const name of allStreamNames(layout)) await jsm.streams.info(name);
    return true;
  } catch (err) {
    if (err instanceof JetStreamApiError && err.status === 404) return false;
    return undefined;
  }
}

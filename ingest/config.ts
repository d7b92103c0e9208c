// Ingest node configuration, read once from the environment (docs/configuration.md).
import { availableParallelism } from 'node:os';
import {
  configHelp,
  envBool,
  envBytes,
  envDuration,
  envInt,
  envNumber,
  envString,
  loadConfig,
  natsAuthSettings,
  byteSize,
  configuredStreamLayout,
  streamPartitionsSettings,
  setting,
  type ConfigOf,
} from '../lib/index.js';
import { z } from 'zod';
import { MIN_EVENT_ROOM } from './message-size.js';

const cores = availableParallelism();

/** The default of MAX_DECOMPRESSED_BYTES, as help and docs/configuration.md show it: it follows MAX_BODY_BYTES. */
const FOLLOWS_BODY_LIMIT = '5 × MAX_BODY_BYTES';
/** Decoded payloads may be this many times the wire limit by default (PostHog's production ratio). */
const DECOMPRESSED_PER_BODY_BYTE = 5;

/** A size, or `fallback` (the text shown as default) when unset: resolved once the others are read. */
const envBytesOr = <T extends string>(fallback: T) =>
  z
    .string()
    .default(fallback)
    .transform((v, ctx): number | T => (v === fallback ? fallback : byteSize(v, ctx)));

export const ingestConfigDefinition = {
  host: setting('CAPTURE_HOST', envString('127.0.0.1'), 'address the capture server listens on (0.0.0.0 for all)'),
  port: setting('CAPTURE_PORT', envInt(8000, 0), 'capture port (0 = any free port)'),
  listenFd: setting(
    'CAPTURE_LISTEN_FD',
    envInt(-1, -1),
    'serve the TCP socket this inherited file descriptor is bound to, instead of CAPTURE_HOST:CAPTURE_PORT (-1); how `npm start -- --ingest N` lets N nodes share one capture port',
  ),
  metricsPort: setting(
    'INGEST_METRICS_PORT',
    envInt(-1, -1),
    "also serve /metrics, /_health and /_ready (and nothing else) on this port of CAPTURE_HOST (-1: no such port; 0: any free one). npm start gives each ingest node its own: nodes sharing the capture port are otherwise read at random, and the admin server's live page reads every node",
  ),
  natsUrl: setting('NATS_URL', envString('nats://127.0.0.1:4222'), 'NATS server URL(s), comma-separated'),
  ...natsAuthSettings('ingest'),
  shardCount: setting('SHARD_COUNT', envInt(16, 1), 'shards per project; must match every other process of the cluster'),
  ...streamPartitionsSettings(),
  streamLeaderSpreadInterval: setting(
    'STREAM_LEADER_SPREAD_INTERVAL',
    envDuration('1m'),
    "with STREAM_PARTITIONS > 1 on a NATS cluster: how often this node checks that each kind's stream leaders are spread over the NATS nodes, and steps a leader down where one node leads more than its share (also at start); 0 never does",
  ),
  streamReplicas: setting('STREAM_REPLICAS', envInt(1, 1), 'replicas of each JetStream stream (3 on a 3-node cluster)'),
  duplicateWindow: setting('STREAM_DUPLICATE_WINDOW', envDuration('2m'), 'JetStream de-duplication window for Nats-Msg-Id'),
  historicalDuplicateWindow: setting(
    'STREAM_HISTORICAL_DUPLICATE_WINDOW',
    envDuration('1h'),
    'de-duplication window of HISTORICAL: a historical batch sent again within it (an importer resuming) is stored once; the server keeps every message id of the window in memory',
  ),
  processedDuplicateWindow: setting('STREAM_PROCESSED_DUPLICATE_WINDOW', envDuration('1h'), 'de-duplication window of PROCESSED: how long a worker may be unable to commit a published batch before its republish could duplicate it'),
  streamMaxAge: setting('STREAM_MAX_AGE', envDuration('7d'), 'how long streams keep messages (0 = forever)'),
  streamMaxBytes: setting('STREAM_MAX_BYTES', envBytes('-1'), 'size limit of each stream (-1 = limited only by the server); when full, capture answers 503'),
  streamLimitsUpdate: setting(
    'STREAM_LIMITS_UPDATE',
    envBool(false),
    "record this node's STREAM_* limits as the cluster's, replacing those recorded in spate-cluster; without it a node whose limits differ refuses to start. To change retention on purpose: start one node with it, then the others with the same STREAM_* values",
  ),
  maxBodyBytes: setting('MAX_BODY_BYTES', envBytes('20MiB'), 'largest request body on the wire; larger gets 413'),
  maxDecompressedBytes: setting(
    'MAX_DECOMPRESSED_BYTES',
    envBytesOr(FOLLOWS_BODY_LIMIT),
    'largest decoded (gunzipped, lz-string) payload in UTF-8 bytes; larger gets 413',
  ),
  maxNestingDepth: setting(
    'MAX_NESTING_DEPTH',
    envInt(128, 1),
    'deepest JSON nesting accepted in a payload (the root is level 1); deeper gets 400 invalid_event. PostHog stops at 128; workers re-serialise events recursively, so thousands of levels would fail them',
  ),
  maxEventsPerRequest: setting(
    'MAX_EVENTS_PER_REQUEST',
    envInt(100_000, 1),
    'most events one request may carry; more gets 413 too_many_events. A 20 MiB body of realistic ~350-byte events holds ~60k; a gzip of a million tiny events would store thousands of times what was uploaded',
  ),
  flagsMaxBodyBytes: setting(
    'FLAGS_MAX_BODY_BYTES',
    envBytes('64KiB'),
    'largest body of a feature-flag call (/flags/, /decide/), on the wire and decoded; larger gets 413. Read on the event loop and, like a request head, outside INFLIGHT_BUDGET_BYTES (one per connection at a time): an SDK sends a distinct id and a few properties',
  ),
  parseQueueMax: setting('PARSE_QUEUE_MAX', envInt(256, 1), 'bodies waiting for a parse thread; past it new ones get 503 with Retry-After'),
  inflightBudgetBytes: setting('INFLIGHT_BUDGET_BYTES', envBytes('96MiB'), 'request bytes held at once (bodies being read, parsed, published); past it new requests get 503'),
  parseThreads: setting('PARSE_THREADS', envInt(cores, 1), 'worker threads that decode and parse bodies'),
  parseThreadMaxHeap: setting('PARSE_THREAD_MAX_HEAP', envBytes('96MiB'), 'JS heap (old generation) of each parse thread; a body that needs more gets 413 instead of growing the node'),
  inlineParseMaxBytes: setting(
    'INLINE_PARSE_MAX_BYTES',
    envBytes('6KiB'),
    'bodies up to this size are parsed on the event loop: below ~6 KiB a thread hop costs the event loop more than the parse (bench/parse-inline.ts)',
  ),
  maxMessageBytes: setting('PUBLISH_MAX_MESSAGE_BYTES', envBytes('1MiB', MIN_EVENT_ROOM), 'largest JetStream message (events are packed up to it); capped by the server max_payload less 1 KiB of headers and 12,122 bytes for what a worker adds to an event (person_id, $group_N), so that a captured event always fits PROCESSED: with NATS\'s default max_payload of 1 MiB, 1,035,430 bytes'),
  maxInflightPerSubject: setting('PUBLISH_MAX_INFLIGHT_PER_SUBJECT', envInt(1, 1), 'unacknowledged messages per subject; while at the limit, new events coalesce into the next message. Above 1, a retried message may land behind a later one (per-distinct_id order is then not guaranteed)'),
  ackTimeout: setting('PUBLISH_ACK_TIMEOUT', envDuration('5s'), 'how long to wait for a JetStream PubAck before retrying'),
  publishAttempts: setting('PUBLISH_ATTEMPTS', envInt(6, 1), 'attempts per message (same Nats-Msg-Id) before the request gets 503; 50 ms between the first two, doubling to 1 s (6 wait ≈1.5 s, past a stream leader election)'),
  retryAfterSeconds: setting('RETRY_AFTER_SECONDS', envInt(1, 0), 'Retry-After sent with 503'),
  spikeEventsPerSecond: setting('SPIKE_EVENTS_PER_SECOND', envNumber(100), 'per (project, distinct_id) sustained realtime rate before events divert to OVERFLOW (0 disables)'),
  spikeBurst: setting('SPIKE_BURST', envNumber(1000), 'per (project, distinct_id) burst allowance before diverting to OVERFLOW'),
  spikeMaxTracked: setting('SPIKE_MAX_TRACKED', envInt(100_000, 1), 'distinct ids spike detection remembers (~200 bytes each); past it the least recently seen is forgotten'),
  maxHeaderBytes: setting('HTTP_MAX_HEADER_BYTES', envBytes('64KiB'), 'largest request line plus headers (a GET ?data= payload is in the URL); larger gets 431 and the connection is closed'),
  bodyTimeout: setting('BODY_TIMEOUT', envDuration('60s'), 'how long a request body may take to arrive after its head; slower gets 408 and its bytes are released (a 20 MiB body needs ~2.8 Mbit/s)'),
  maxUploadsPerClient: setting(
    'MAX_UPLOADS_PER_CLIENT',
    envInt(16, 1),
    'request bodies one client address (X-Forwarded-For with TRUST_PROXY) may be sending at once; more get 429. Clients behind one NAT or proxy share it',
  ),
  idleTimeout: setting('HTTP_IDLE_TIMEOUT', envDuration('10s'), 'a connection with no request in progress is closed after this long, and so is one whose request head takes longer'),
  trustProxy: setting('TRUST_PROXY', envBool(false), 'take the client IP from X-Forwarded-For (only behind a trusted proxy)'),
  drainTimeout: setting('SHUTDOWN_DRAIN_TIMEOUT', envDuration('30s'), 'on SIGTERM, how long in-flight requests may take to finish'),
};

type RawIngestConfig = ConfigOf<typeof ingestConfigDefinition>;

export type IngestConfig = Readonly<Omit<RawIngestConfig, 'maxDecompressedBytes'> & { maxDecompressedBytes: number }>;

export function loadIngestConfig(env: Readonly<Record<string, string | undefined>> = process.env): IngestConfig {
  const raw = loadConfig(ingestConfigDefinition, env);
  configuredStreamLayout(raw);
  const { maxDecompressedBytes, maxBodyBytes } = raw;
  return Object.freeze({
    ...raw,
    maxDecompressedBytes: maxDecompressedBytes === FOLLOWS_BODY_LIMIT ? DECOMPRESSED_PER_BODY_BYTE * maxBodyBytes : maxDecompressedBytes,
  });
}

export const ingestHelp = () => configHelp('spate ingest node: PostHog-compatible capture into JetStream', ingestConfigDefinition);

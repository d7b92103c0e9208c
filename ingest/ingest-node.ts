// Assembles an ingest node: NATS + streams + project registry + parse pool + publisher + HTTP (node:net + llhttp).
// startIngest(config) → { url, port, stop() }. Shutdown is ordered and idempotent: stop
// listening → finish in-flight requests → flush publishes → drain NATS → close the pool.
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import {
  clusterStreamSettings,
  configuredStreamLayout,
  connectNats,
  createLogger,
  ensureClusterSettings,
  ensureStreams,
  natsAuthOf,
  retryUnanswered,
  StreamLeaderSpreader,
  streamsPresent,
  watchNatsConnection,
  type Logger,
} from '../lib/index.js';
import type { IngestConfig } from './config.js';
import { hotMetrics, listenHttp, type CaptureDeps, type ServerDeps } from './http/index.js';
import { SharedBudget } from './inflight-budget.js';
import { messageSizeLimit } from './message-size.js';
import { createIngestMetrics, type IngestMetrics } from './metrics.js';
import { ParsePool } from './pool/index.js';
import { EventPublisher, ProjectLimiter, SpikeLimiter } from './publish/index.js';
import { NO_SITE_APPS } from './sdk-config/index.js';
import { TokenRegistry } from './token-registry.js';

export interface IngestNode {
  url: string;
  port: number;
  /** Where only /metrics, /_health and /_ready are served (INGEST_METRICS_PORT), if anywhere. */
  metricsUrl: string | undefined;
  metrics: IngestMetrics;
  /** NATS connected, streams present, project registry loaded. */
  isReady(): boolean;
  stop(): Promise<void>;
}

export interface IngestDeps {
  log?: Logger;
  /** Told how to undo what a start that later fails has opened (the process shell runs these). */
  onFailedStart?: (undo: () => unknown) => void;
}

export async function startIngest(config: IngestConfig, deps: IngestDeps = {}): Promise<IngestNode> {
  const log = deps.log ?? createLogger('ingest');
  const metrics = createIngestMetrics();
  // Without async traces: the client would capture a stack for every publish (two errors made per
  // message, most of the event loop's publish cost; publish failures are logged with their subject).
  const nc = await connectNats(config.natsUrl, 'spate-ingest', natsAuthOf(config), { asyncTraces: false });
  deps.onFailedStart?.(() => nc.close());
  let maxMessageBytes: number;
  try {
    // First: a server whose max_payload leaves no room for events stops the start here.
    maxMessageBytes = messageSizeLimit(config.maxMessageBytes, nc.info?.max_payload);
  } catch (err) {
    await nc.close();
    throw err;
  }
  const jsm = await retryUnanswered('jetstream manager', () => jetstreamManager(nc), log);
  const layout = configuredStreamLayout(config);
  const streamLimits = {
    replicas: config.streamReplicas,
    duplicateWindowMs: config.duplicateWindow,
    processedDuplicateWindowMs: config.processedDuplicateWindow,
    historicalDuplicateWindowMs: config.historicalDuplicateWindow,
    maxAgeMs: config.streamMaxAge,
    maxBytes: config.streamMaxBytes,
  };
  // Checked before they are applied: a node whose STREAM_* differ from the cluster's recorded ones
  // must not change every stream (a stray STREAM_MAX_AGE=1h would shrink everyone's retention).
  await ensureClusterSettings(
    nc,
    { shardCount: config.shardCount, streamPartitions: config.streamPartitions, streams: clusterStreamSettings(streamLimits), replaceStreams: config.streamLimitsUpdate },
    config.streamReplicas,
    log,
  ).catch(async (err: unknown) => {
    await nc.close();
    throw err;
  });
  await retryUnanswered('streams', () => ensureStreams(jsm, streamLimits, layout), log);
  const leaders = new StreamLeaderSpreader(nc, jsm, layout, config.streamLeaderSpreadInterval, log);
  deps.onFailedStart?.(() => leaders.stop());
  await leaders.start();

  const registry = new TokenRegistry(nc, config.streamReplicas, log);
  deps.onFailedStart?.(() => registry.stop());
  await registry.start();

  const budget = new SharedBudget(config.inflightBudgetBytes);
  const pool = new ParsePool(
    {
      threads: config.parseThreads,
      maxHeapBytes: config.parseThreadMaxHeap,
      inlineMaxBytes: config.inlineParseMaxBytes,
      limits: {
        maxDecompressedBytes: config.maxDecompressedBytes,
        maxNestingDepth: config.maxNestingDepth,
        maxEventsPerRequest: config.maxEventsPerRequest,
        maxMessageBytes,
        shardCount: config.shardCount,
      },
      retryAfterSeconds: config.retryAfterSeconds,
      maxQueue: config.parseQueueMax,
      budget,
    },
    registry,
    metrics,
  );
  deps.onFailedStart?.(() => pool.close());
  const publisher = new EventPublisher(
    jetstream(nc),
    {
      maxMessageBytes,
      maxInflightPerSubject: config.maxInflightPerSubject,
      ackTimeoutMs: config.ackTimeout,
      attempts: config.publishAttempts,
      retryAfterSeconds: config.retryAfterSeconds,
    },
    metrics,
    log,
  );
  const limiter = new SpikeLimiter({ perSecond: config.spikeEventsPerSecond, burst: config.spikeBurst, maxTracked: config.spikeMaxTracked });

  let natsConnected = true;
  let streamsOk = true;
  let stopping = false;
  // Streams can be deleted from outside; readiness reflects it within a few seconds.
  const checkStreams = () => {
    if (natsConnected) void streamsPresent(jsm, layout).then((ok) => (streamsOk = ok ?? streamsOk));
  };
  const streamCheck = setInterval(checkStreams, 5_000);
  streamCheck.unref();
  watchNatsConnection(nc, (connected, server) => {
    if (connected) log.info({ server }, 'NATS reconnected');
    else log.warn({ server }, 'NATS disconnected; capture answers 503 until it is back');
    natsConnected = connected;
    publisher.setConnected(connected);
    if (connected) checkStreams();
  });

  const isReady = () => natsConnected && streamsOk && registry.ready && !stopping;
  const inflight: CaptureDeps['inflight'] = { count: 0 };
  const captureDeps: CaptureDeps = {
    config,
    maxMessageBytes,
    pool,
    publisher,
    limiter,
    projectLimiter: new ProjectLimiter((token) => registry.lookup(token)?.limits),
    budget,
    metrics,
    hot: hotMetrics(metrics),
    log,
    accepting: () => registry.ready && !stopping,
    inflight,
    uploads: new Map(),
  };

  const serverDeps: ServerDeps = {
    capture: captureDeps,
    sdkConfig: { lookup: registry.lookup, siteApps: NO_SITE_APPS, maxBodyBytes: config.flagsMaxBodyBytes },
    readiness: () => ({ ready: isReady(), checks: { nats: natsConnected, streams: streamsOk, registry: registry.ready, stopping } }),
    beforeScrape: () => {
      metrics.poolQueueDepth.set(pool.queueDepth);
      metrics.inflightBytes.set(budget.usedBytes);
    },
    connection: { maxHeaderBytes: config.maxHeaderBytes, idleTimeoutMs: config.idleTimeout, bodyTimeoutMs: config.bodyTimeout },
  };
  const server = await listenHttp({ host: config.host, port: config.port, fd: config.listenFd }, serverDeps);
  deps.onFailedStart?.(() => server.close());
  // Its own port for the operations routes: several nodes sharing one capture port are told apart.
  const operations = config.metricsPort >= 0 ? await listenHttp({ host: config.host, port: config.metricsPort, fd: -1 }, { ...serverDeps, operationsOnly: true }) : undefined;
  const port = server.port;
  const url = `http://${config.host === '0.0.0.0' ? '127.0.0.1' : config.host}:${port}`;
  const metricsUrl = operations ? `http://${config.host === '0.0.0.0' ? '127.0.0.1' : config.host}:${operations.port}` : undefined;
  log.info({ url, metricsUrl, shards: config.shardCount, threads: config.parseThreads, maxMessageBytes }, 'ingest node listening');

  let stopped: Promise<void> | undefined;
  const stop = () =>
    (stopped ??= (async () => {
      stopping = true;
      server.close();
      operations?.close();
      await waitForIdle(inflight, config.drainTimeout);
      await publisher.idle();
      server.closeConnections();
      operations?.closeConnections();
      clearInterval(streamCheck);
      await leaders.stop();
      registry.stop();
      limiter.close();
      await nc.drain().catch(() => undefined);
      await pool.close();
      log.info('ingest node stopped');
    })());

  return { url, port, metricsUrl, metrics, isReady, stop };
}

function waitForIdle(inflight: CaptureDeps['inflight'], timeoutMs: number): Promise<void> {
  if (inflight.count === 0) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, timeoutMs);
    inflight.onIdle = () => {
      clearTimeout(timer);
      resolve();
    };
  });
}


// Assembles an ingest node: NATS + streams + project registry + parse pool + publisher + uWS.
// startIngest(config) → { url, port, stop() }. Shutdown is ordered and idempotent: stop
// listening → finish in-flight requests → flush publishes → drain NATS → close the pool.
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import {
  connectNats,
  createLogger,
  ensureClusterSettings,
  ensureStreams,
  retryUnanswered,
  streamsPresent,
  watchNatsConnection,
  type Logger,
} from '../lib/index.js';
import { CAPTURE_ROUTES, handleCapture, hotMetrics, InflightBudget, type CaptureDeps } from './capture-route.js';
import type { IngestConfig } from './config.js';
import { CaptureError, captureErrorResponse } from './errors.js';
import { respond, type ResponseState } from './http.js';
import { createIngestMetrics, type IngestMetrics } from './metrics.js';
import { ParsePool } from './parse-pool.js';
import { EventPublisher } from './publisher.js';
import { SpikeLimiter } from './spike-limiter.js';
import { TokenRegistry } from './token-registry.js';
import { uws, type us_listen_socket } from './uws.js';

export interface IngestNode {
  url: string;
  port: number;
  metrics: IngestMetrics;
  /** NATS connected, streams present, project registry loaded. */
  isReady(): boolean;
  stop(): Promise<void>;
}

export interface IngestDeps {
  log?: Logger;
}

/** Room for headers (Nats-Msg-Id, Spate-Events) inside the server's max_payload. */
const HEADER_ALLOWANCE = 1024;

export async function startIngest(config: IngestConfig, deps: IngestDeps = {}): Promise<IngestNode> {
  const log = deps.log ?? createLogger('ingest');
  const metrics = createIngestMetrics();
  const nc = await connectNats(config.natsUrl, 'spate-ingest');
  const jsm = await retryUnanswered('jetstream manager', () => jetstreamManager(nc), log);
  const streamLimits = {
    replicas: config.streamReplicas,
    duplicateWindowMs: config.duplicateWindow,
    processedDuplicateWindowMs: config.processedDuplicateWindow,
    historicalDuplicateWindowMs: config.historicalDuplicateWindow,
    maxAgeMs: config.streamMaxAge,
    maxBytes: config.streamMaxBytes,
  };
  await retryUnanswered('streams', () => ensureStreams(jsm, streamLimits), log);
  await ensureClusterSettings(nc, { shardCount: config.shardCount }, config.streamReplicas, log);

  const registry = new TokenRegistry(nc, config.streamReplicas, log);
  await registry.start();

  const maxMessageBytes = Math.min(config.maxMessageBytes, (nc.info?.max_payload ?? 1024 * 1024) - HEADER_ALLOWANCE);
  const pool = new ParsePool(
    {
      threads: config.parseThreads,
      maxHeapBytes: config.parseThreadMaxHeap,
      inlineMaxBytes: config.inlineParseMaxBytes,
      limits: { maxDecompressedBytes: config.maxDecompressedBytes, maxMessageBytes, shardCount: config.shardCount },
      retryAfterSeconds: config.retryAfterSeconds,
    },
    registry,
    metrics,
  );
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
    if (natsConnected) void streamsPresent(jsm).then((ok) => (streamsOk = ok ?? streamsOk));
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
    budget: new InflightBudget(config.inflightBudgetBytes, metrics),
    metrics,
    hot: hotMetrics(metrics),
    log,
    accepting: () => registry.ready && !stopping,
    inflight,
  };

  const app = uws.App();
  app.any('/*', (res, req) => {
    const url = req.getUrl();
    const path = url.length > 1 && url.endsWith('/') ? url.slice(0, -1) : url;
    const route = CAPTURE_ROUTES.get(path);
    if (route) return handleCapture(captureDeps, route, res, req);
    const state: ResponseState = { aborted: false, origin: '' };
    const method = req.getMethod();
    switch (path) {
      case '/_health':
        return respond(res, state, { status: 200, body: '{"status":"ok"}' });
      case '/_ready': {
        const checks = { nats: natsConnected, streams: streamsOk, registry: registry.ready, stopping };
        return respond(res, state, { status: isReady() ? 200 : 503, body: JSON.stringify({ ready: isReady(), checks }) });
      }
      case '/metrics':
        if (method !== 'get') break;
        res.onAborted(() => (state.aborted = true));
        metrics.poolQueueDepth.set(pool.queueDepth);
        void metrics.registry.metrics().then((text) => respond(res, state, { status: 200, body: text, contentType: metrics.registry.contentType }));
        return;
    }
    const answer = captureErrorResponse(new CaptureError('not_found'));
    respond(res, state, { status: answer.status, body: JSON.stringify(answer.body) });
  });

  const listenSocket = await new Promise<us_listen_socket>((resolve, reject) => {
    app.listen(config.host, config.port, (socket) => (socket ? resolve(socket) : reject(new Error(`cannot listen on ${config.host}:${config.port}`))));
  });
  const port = uws.us_socket_local_port(listenSocket);
  const url = `http://${config.host === '0.0.0.0' ? '127.0.0.1' : config.host}:${port}`;
  log.info({ url, shards: config.shardCount, threads: config.parseThreads, maxMessageBytes }, 'ingest node listening');

  let stopped: Promise<void> | undefined;
  const stop = () =>
    (stopped ??= (async () => {
      stopping = true;
      uws.us_listen_socket_close(listenSocket);
      await waitForIdle(inflight, config.drainTimeout);
      await publisher.idle();
      clearInterval(streamCheck);
      registry.stop();
      limiter.close();
      await nc.drain().catch(() => undefined);
      await pool.close();
      log.info('ingest node stopped');
    })());

  return { url, port, metrics, isReady, stop };
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


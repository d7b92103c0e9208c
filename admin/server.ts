// startAdmin: migrations → PostgreSQL pool → NATS: the pipeline streams, the KV buckets
// (spate-projects, spate-batch-exports, spate-plugin-sources, spate-plugin-configs; each reconciled), the outbox and
// the stream consumers → HTTP (the API, and the live cluster page at GET /). stop() undoes it
// in order: stop listening and finish in-flight requests → stop consuming streams → publish what
// the outbox holds → stop KV following → finish sending emails → drain NATS → close PostgreSQL.
// Idempotent.
import { jetstreamManager } from '@nats-io/jetstream';
import {
  connectNats,
  watchNatsConnection,
  createLogger,
  createMetricsRegistry,
  ensurePipelineStreams,
  natsAuthOf,
  retryUnanswered,
  secretKeyringOf,
  type Logger,
  type NatsConnection,
} from '../lib/index.js';
import { openBatchExportsKv } from './batch-exports-kv.js';
import { projectLimitSettings, type AdminConfig } from './config.js';
import { batchExportLogsSink, batchExportRunsSink } from './consumers/batch-export-reports.js';
import { pluginLogsSink } from './consumers/plugin-logs.js';
import { StreamIngester, type Sink } from './consumers/stream-ingester.js';
import { migrate } from './db/migrate.js';
import { createPool, type Pool } from './db/pool.js';
import { DomainVerifier } from './domain-verifier.js';
import { buildApp } from './http/app.js';
import { InviteMailer } from './invite-mailer.js';
import { LiveFigures, liveRoutes, StreamSizes } from './live/index.js';
import type { KvMirror } from './kv-mirror.js';
import { LogRetention } from './log-retention.js';
import { Outbox } from './outbox.js';
import { openPluginConfigsKv } from './plugin-configs-kv.js';
import { openPluginSourcesKv } from './plugin-sources-kv.js';
import { openProjectsKv } from './projects-kv.js';
import { apiRoutes } from './routes/index.js';
import { sealStoredSecrets } from './secrets-at-rest.js';
import type { Services } from './services.js';
import { compileStoredSources } from './store/plugins.js';

/** How often the outbox is flushed besides right after each request that wrote to it. */
const OUTBOX_INTERVAL_MS = 5_000;
/**
 * JetStream de-duplication window of the pipeline streams: covers the outbox republishing a
 * request after a crash between publish and delete (it retries within seconds); consumers also
 * dedupe requests by id. Kept short because the server holds every id of the window in memory.
 */
const PIPELINE_DUPLICATE_WINDOW_MS = 2 * 60_000;

/** Version of the API document (GET /api/schema/). */
export const API_VERSION = '1.0.0';

export interface AdminDeps {
  /** A NATS connection to use (not closed by stop()); otherwise one to NATS_URL is made. */
  nats?: NatsConnection;
  /** A PostgreSQL pool to use (not closed by stop()); otherwise one to DATABASE_URL is made. */
  pool?: Pool;
  logger?: Logger;
}

export interface AdminHandle {
  /** Base URL of the API, e.g. http://127.0.0.1:8010 */
  url: string;
  port: number;
  stop(): Promise<void>;
}

function publicHost(host: string): string {
  if (host === '0.0.0.0' || host === '') return '127.0.0.1';
  if (host === '::') return '[::1]';
  return host.includes(':') ? `[${host}]` : host;
}

export async function startAdmin(config: AdminConfig, deps: AdminDeps = {}): Promise<AdminHandle> {
  const log = deps.logger ?? createLogger('admin', config.logLevel);
  const cleanups: Array<() => Promise<void>> = [];
  const cleanup = async () => {
    for (const step of cleanups.splice(0).reverse()) {
      await step().catch((err: unknown) => log.error({ err }, 'error while stopping the admin server'));
    }
  };

  try {
    await migrate(config.databaseUrl, log);

    const pool = deps.pool ?? createPool(config.databaseUrl, config.databasePoolSize);
    if (!deps.pool) cleanups.push(() => pool.end());

    // Before the KV buckets are reconciled from PostgreSQL: no plain secret reaches them.
    const secrets = secretKeyringOf(config);
    const sealed = await sealStoredSecrets(pool, secrets, log);
    if (sealed.batchExports + sealed.pluginConfigs > 0) log.info(sealed, 'stored secrets encrypted with the current SPATE_SECRET_KEY');
    if (sealed.failed > 0) log.error(sealed, 'some stored secrets are encrypted with a key that is not configured');

    const compiled = await compileStoredSources(pool, log);
    if (compiled > 0) log.info({ plugins: compiled }, 'compiled the stored code of plugins saved before sources were compiled');

    const nc = deps.nats ?? (await connectNats(config.natsUrl, 'spate-admin', natsAuthOf(config)));
    let natsConnected = true;
    watchNatsConnection(nc, (connected) => (natsConnected = connected));
    if (!deps.nats) cleanups.push(() => nc.drain());

    const jsm = await retryUnanswered('jetstream manager', () => jetstreamManager(nc), log);
    const pipelineLimits = {
      replicas: config.pipelineReplicas,
      maxBytes: config.pipelineStreamMaxBytes,
      requestMaxAgeMs: config.pipelineRequestMaxAge,
      duplicateWindowMs: PIPELINE_DUPLICATE_WINDOW_MS,
    };
    await retryUnanswered('pipeline streams', () => ensurePipelineStreams(jsm, pipelineLimits), log);

    const inviteMailer = config.smtpUrl ? new InviteMailer(config.smtpUrl, config.smtpFrom, log) : undefined;
    if (inviteMailer) cleanups.push(() => inviteMailer.close());

    const mirror = async (kv: KvMirror) => {
      cleanups.push(() => kv.stop());
      const reconciled = await retryUnanswered(`${kv.bucket} reconcile`, () => kv.reconcile(), log);
      log.info(reconciled, `${kv.bucket} KV bucket reconciled with PostgreSQL`);
      await kv.follow(config.databaseUrl, config.projectsReconcileInterval);
      return kv;
    };
    const projectsKv = await mirror(await retryUnanswered('projects bucket', () => openProjectsKv(nc, pool, log, projectLimitSettings(config), config.projectsKvReplicas), log));
    const batchExportsKv = await mirror(await retryUnanswered('batch exports bucket', () => openBatchExportsKv(nc, pool, log, config.pipelineReplicas), log));
    // Sources before configs: a worker that sees a config's record finds the code it names.
    const pluginSourcesKv = await mirror(await retryUnanswered('plugin sources bucket', () => openPluginSourcesKv(nc, pool, log, config.pipelineReplicas), log));
    const pluginConfigsKv = await mirror(await retryUnanswered('plugin configs bucket', () => openPluginConfigsKv(nc, pool, log, config.pipelineReplicas), log));

    const outbox = new Outbox(nc, pool, log);
    cleanups.push(async () => {
      await outbox.flush();
      await outbox.stop();
    });
    outbox.start(OUTBOX_INTERVAL_MS);

    const metrics = createMetricsRegistry('admin');
    const sinks: Array<Sink<unknown>> = [pluginLogsSink, batchExportRunsSink, batchExportLogsSink] as Array<Sink<unknown>>;
    for (const sink of sinks) {
      const ingester = new StreamIngester(nc, pool, sink, log, metrics, { batchRows: config.logBatchRows });
      await retryUnanswered(`${sink.name} consumer`, () => ingester.start(), log);
      cleanups.push(() => ingester.stop());
    }

    const retention = new LogRetention(pool, config.logRetention, log);
    retention.start();
    cleanups.push(() => retention.stop());

    const services: Services = {
      config,
      pool,
      log,
      secrets,
      projectsKv,
      batchExportsKv,
      pluginConfigsKv,
      pluginSourcesKv,
      outbox,
      domainVerifier: new DomainVerifier({ servers: config.dnsResolver, timeoutMs: config.dnsTimeout }),
      inviteMailer,
    };
    // Ready = the two dependencies answer: a replica that lost either is taken out of rotation.
    const readiness = async () => ({
      nats: !nc.isClosed() && natsConnected,
      postgres: await pool.query('select 1').then(
        () => true,
        () => false,
      ),
    });
    const live = new LiveFigures({ metricsUrls: config.clusterMetricsUrls, streams: new StreamSizes(nc, jsm), db: pool, log, refreshMs: config.liveRefresh });
    const pages = liveRoutes(live, pool, log);
    const app = buildApp({ routes: apiRoutes, services, metrics, version: API_VERSION, readiness, pages });
    cleanups.push(() => app.close());
    await app.listen({ host: config.host, port: config.port });
    const address = app.server.address();
    const port = typeof address === 'object' && address ? address.port : config.port;
    const url = `http://${publicHost(config.host)}:${port}`;
    log.info({ url }, 'admin server listening');

    let stopping: Promise<void> | undefined;
    return {
      url,
      port,
      stop: () => (stopping ??= cleanup()),
    };
  } catch (err) {
    await cleanup();
    throw err;
  }
}

// startAdmin: migrations → PostgreSQL pool → NATS and the projects KV bucket (reconciled) →
// HTTP. stop() undoes it in order: stop listening and finish in-flight requests → stop KV
// following → finish sending emails → drain NATS → close PostgreSQL. Idempotent.
import {
  connectNats,
  createLogger,
  createMetricsRegistry,
  type Logger,
  type NatsConnection,
} from '../lib/index.js';
import type { AdminConfig } from './config.js';
import { migrate } from './db/migrate.js';
import { createPool, type Pool } from './db/pool.js';
import { DomainVerifier } from './domain-verifier.js';
import { buildApp } from './http/app.js';
import { InviteMailer } from './invite-mailer.js';
import { ProjectsKv } from './projects-kv.js';
import { apiRoutes } from './routes/index.js';
import type { Services } from './services.js';

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

    const nc = deps.nats ?? (await connectNats(config.natsUrl, 'spate-admin'));
    if (!deps.nats) cleanups.push(() => nc.drain());

    const projectsKv = await ProjectsKv.open(nc, pool, log, config.projectsKvReplicas);
    cleanups.push(() => projectsKv.stop());
    const reconciled = await projectsKv.reconcile();
    log.info(reconciled, 'spate-projects KV bucket reconciled with PostgreSQL');
    await projectsKv.follow(config.databaseUrl, config.projectsReconcileInterval);

    const inviteMailer = config.smtpUrl ? new InviteMailer(config.smtpUrl, config.smtpFrom, log) : undefined;
    if (inviteMailer) cleanups.push(() => inviteMailer.close());

    const services: Services = {
      config,
      pool,
      log,
      projectsKv,
      domainVerifier: new DomainVerifier({ servers: config.dnsResolver, timeoutMs: config.dnsTimeout }),
      inviteMailer,
    };
    const app = buildApp({ routes: apiRoutes, services, metrics: createMetricsRegistry('admin'), version: API_VERSION });
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

// What each host of the rig runs, as an operator would configure it on separate machines: the
// deployables' own entry points (dist/*/main.js) with the settings of docs/configuration.md, the
// NATS nodes with deploy/nats's configuration, HAProxy in front of the ingest nodes.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { NATS_USERS, type NatsRole } from '../../lib/index.js';
import { natsConfigText, type NatsServerAuth } from '../../deploy/local/nats-server.js';
import { ADDRESS, INGEST_HOSTS, NATS2_LINK, NATS2_ROUTE_OUT, NATS_HOSTS, natsUrl, PORT, STREAM_PARTITIONS, WORKER_HOSTS, type NatsHost } from './topology.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** A built entry point (`dist/<relative>`); the rig runs what `npm run build` made. */
export function builtEntry(relative: string): string {
  const path = join(ROOT, 'dist', relative);
  if (!existsSync(path)) throw new Error(`${path} is missing: the multi-host rig runs the built deployables (npm run build)`);
  return path;
}

/**
 * Builds dist/ (incremental: a few seconds when nothing changed), so the rig never runs
 * deployables older than the sources it is tested with.
 */
export function buildDeployables(): void {
  const tsc = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
  try {
    execFileSync(process.execPath, [tsc, '-p', join(ROOT, 'tsconfig.build.json')], { cwd: ROOT, stdio: 'pipe' });
  } catch (err) {
    const e = err as { stdout?: Buffer; message: string };
    throw new Error(`npm run build failed, so the rig cannot run the deployables:\n${e.stdout?.toString() || e.message}`, { cause: err });
  }
}

/** nats-server configuration of one rig node: deploy/nats's files, then this node's addresses. */
export function natsNodeConfig(host: NatsHost, storeDir: string, auth: NatsServerAuth): string {
  const routeTo = (peer: NatsHost) => (host === 'nats2' ? `${NATS2_LINK.linkInner}:${NATS2_ROUTE_OUT[peer as 'nats1' | 'nats3']}` : `${ADDRESS[peer]}:${PORT.natsRoute}`);
  const behindLink = host === 'nats2';
  return natsConfigText({
    dir: storeDir,
    host: behindLink ? NATS2_LINK.inner : ADDRESS[host],
    port: PORT.nats,
    monitorPort: PORT.natsMonitor,
    serverName: `spate-${host}`,
    auth,
    clientAdvertise: behindLink ? `${ADDRESS.nats2}:${PORT.nats}` : undefined,
    cluster: {
      name: 'spate',
      port: PORT.natsRoute,
      routes: NATS_HOSTS.filter((h) => h !== host).map(routeTo),
      advertise: behindLink ? `${ADDRESS.nats2}:${PORT.natsRoute}` : undefined,
    },
  });
}

/** The relay on nats2's link: the bridge side to the node, and the node's routes out to its peers. */
export function nats2LinkRoutes() {
  const inward = [PORT.nats, PORT.natsRoute, PORT.natsMonitor].map((port) => ({
    listen: { host: NATS2_LINK.address, port },
    target: { host: NATS2_LINK.inner, port },
  }));
  const outward = (['nats1', 'nats3'] as const).map((peer) => ({
    listen: { host: NATS2_LINK.linkInner, port: NATS2_ROUTE_OUT[peer] },
    target: { host: ADDRESS[peer], port: PORT.natsRoute },
  }));
  return [...inward, ...outward];
}

export interface RigSecrets {
  nats: NatsServerAuth;
  secretKey: string;
}

export const databaseUrl = `postgres://postgres@${ADDRESS.db}:${PORT.postgres}/spate`;

/** A deployable's environment: nothing of the test process's, only PATH and its settings. */
function deployableEnv(role: NatsRole, secrets: RigSecrets, settings: Record<string, string>): Record<string, string> {
  return {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    LOG_LEVEL: 'info',
    NATS_URL: natsUrl,
    NATS_USER: NATS_USERS[role],
    NATS_PASSWORD: secrets.nats.passwords[role],
    ...settings,
  };
}

export function adminEnv(secrets: RigSecrets): Record<string, string> {
  const metrics = [
    ...INGEST_HOSTS.map((h) => `http://${ADDRESS[h]}:${PORT.ingestMetrics}`),
    ...WORKER_HOSTS.map((h) => `http://${ADDRESS[h]}:${PORT.worker}`),
  ];
  return deployableEnv('admin', secrets, {
    DATABASE_URL: databaseUrl,
    SPATE_SECRET_KEY: secrets.secretKey,
    ADMIN_HOST: ADDRESS.db,
    ADMIN_PORT: String(PORT.admin),
    PROJECTS_KV_REPLICAS: '3',
    PIPELINE_REPLICAS: '3',
    // Each R3 pipeline stream reserves its limit on every node: five of 1 GiB (the default) would
    // not fit nats3's 1 GiB store (a tmpfs the disk-full fault fills).
    PIPELINE_STREAM_MAX_BYTES: '64MiB',
    CLUSTER_METRICS_URLS: metrics.join(','),
  });
}

/** `spate admin bootstrap`'s environment (run once on the db host). */
export function bootstrapEnv(secrets: RigSecrets, dataDir: string): Record<string, string> {
  return deployableEnv('admin', secrets, { DATABASE_URL: databaseUrl, PROJECTS_KV_REPLICAS: '3', SPATE_DATA_DIR: dataDir });
}

export function ingestEnv(host: (typeof INGEST_HOSTS)[number], secrets: RigSecrets): Record<string, string> {
  return deployableEnv('ingest', secrets, {
    CAPTURE_HOST: ADDRESS[host],
    CAPTURE_PORT: String(PORT.capture),
    INGEST_METRICS_PORT: String(PORT.ingestMetrics),
    STREAM_REPLICAS: '3',
    STREAM_PARTITIONS: String(STREAM_PARTITIONS),
    // HAProxy sets X-Forwarded-For to the client's address (haproxyConfig).
    TRUST_PROXY: 'true',
  });
}

export function workerEnv(host: (typeof WORKER_HOSTS)[number], secrets: RigSecrets): Record<string, string> {
  return deployableEnv('worker', secrets, {
    DATABASE_URL: databaseUrl,
    SPATE_SECRET_KEY: secrets.secretKey,
    NATS_REPLICAS: '3',
    STREAM_PARTITIONS: String(STREAM_PARTITIONS),
    WORKER_METRICS_HOST: ADDRESS[host],
    WORKER_METRICS_PORT: String(PORT.worker),
  });
}

/** HAProxy on the lb host, set as deploy/compose/haproxy.cfg is, with the two ingest hosts as servers. */
export function haproxyConfig(): string {
  return [
    '# Written by test/multihost/services.ts: deploy/compose/haproxy.cfg with fixed servers.',
    'defaults',
    '  mode http',
    '  timeout connect 5s',
    '  timeout client 60s',
    '  timeout server 60s',
    '  timeout http-request 10s',
    '  timeout http-keep-alive 10s',
    '  retries 2',
    '  option redispatch',
    'frontend capture',
    `  bind ${ADDRESS.lb}:${PORT.capture}`,
    '  http-request set-header X-Forwarded-For %[src]',
    '  default_backend ingest',
    'backend ingest',
    '  balance leastconn',
    '  option httpchk',
    '  http-check send meth GET uri /_ready',
    '  http-check expect status 200',
    '  default-server check inter 2s fall 2 rise 1',
    ...INGEST_HOSTS.map((h) => `  server ${h} ${ADDRESS[h]}:${PORT.capture}`),
    '',
  ].join('\n');
}

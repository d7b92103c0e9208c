// `npm start`: the whole system on one machine, supervised. Starts in dependency order and
// stops in the reverse one: ingest nodes → workers → admin → NATS → PostgreSQL.
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { execFile } from 'node:child_process';
import * as net from 'node:net';
import { isIP } from 'node:net';
import * as util from 'node:util';
import { promisify } from 'node:util';
import { clusterFilePath, NATS_ROLES, NATS_USERS, runtimeModule, writeClusterFile, type ClusterFile, type NatsRole } from '../../lib/index.js';
import { natsConfigText, natsServerEnv, waitForJetStreamLeader } from '../local/nats-server.js';
import { placeDataDir, PostgresServer } from '../local/postgres.js';
import { waitFor } from '../local/wait.js';
import { loadLocalSecrets } from './local-secrets.js';
import { allocatePorts, releasePorts } from './ports.js';
import { hasSetpriv, withParentDeathSignal } from '../local/parent-death.js';
import type { LineFormatter } from './log-lines.js';
import { SupervisedChild, type ChildSpec, type SupervisorLog } from './supervisor.js';

export interface LaunchOptions {
  dataDir: string;
  natsNodes: 1 | 3;
  ingest: number;
  workers: number;
  /** STREAM_PARTITIONS of the ingest nodes and workers (default: the environment's, else 1). */
  streamPartitions?: number;
  env: NodeJS.ProcessEnv;
  /** How the children's output lines are shown (default: as they are, prefixed with the child's name). */
  formatLine?: LineFormatter;
}

export interface LocalCluster {
  cluster: ClusterFile;
  stop(): Promise<void>;
}

type ProcessEntry = NonNullable<ClusterFile['processes']>[number];

/** Runs a Node deployable's main (built JS, or TypeScript through tsx under tests). */
/**
 * A TCP socket bound to host:port but not listening: each ingest node inherits it and listens on
 * it, so all of them accept from one queue. net._createServerHandle is what node:cluster uses to
 * share a listening socket between processes; it returns an errno on failure.
 */
function bindCaptureSocket(host: string, port: number): { fd: number; close(): void } {
  const internal = net as unknown as { _createServerHandle: (address: string, port: number, addressType: number, fd: undefined, flags: number) => unknown };
  const handle = internal._createServerHandle(host, port, isIP(host) === 6 ? 6 : 4, undefined, 0);
  if (typeof handle === 'number') throw new Error(`cannot bind the capture port ${host}:${port} (${util.getSystemErrorName(handle)})`);
  return handle as { fd: number; close(): void };
}

function nodeCommand(relativeMain: string): { command: string; args: string[] } {
  const entry = runtimeModule(import.meta.url, relativeMain);
  return { command: process.execPath, args: [...entry.execArgv, entry.path] };
}

interface BootstrapResult {
  organizationId: string;
  projectId: number;
  projectApiKey: string;
  personalApiKey: string;
}

/** `spate admin bootstrap`, as an operator would run it: the launcher talks to admin only through its CLI. */
async function bootstrap(env: NodeJS.ProcessEnv): Promise<BootstrapResult> {
  const node = nodeCommand('../../cli/spate');
  // A one-shot child, but one too: it ends with the launcher.
  const cli = withParentDeathSignal('SIGTERM', node.command, [...node.args, 'admin', 'bootstrap']);
  try {
    const { stdout } = await promisify(execFile)(cli.command, cli.args, { env, maxBuffer: 1024 * 1024 });
    return JSON.parse(stdout) as BootstrapResult;
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    throw new Error(`spate admin bootstrap failed: ${e.stderr?.trim() || e.message}`, { cause: err });
  }
}

export async function startLocalCluster(options: LaunchOptions, log: SupervisorLog): Promise<LocalCluster> {
  const children: { role: ProcessEntry['role']; child: SupervisedChild }[] = [];
  // Reverse dependency order: nothing that publishes outlives NATS, nothing that writes outlives PostgreSQL.
  /** What the launcher itself holds open (the shared capture socket), closed after the children. */
  const held: { close(): void }[] = [];
  const stopAll = async () => {
    // Nothing is restarted once stopping began, even a child that exits before its turn.
    for (const { child } of children) child.markStopping();
    for (const role of ['ingest', 'worker', 'admin', 'nats', 'postgres'] as const) {
      await Promise.all(children.filter((c) => c.role === role).map((c) => c.child.stop()));
    }
    for (const h of held.splice(0)) h.close();
    releasePorts(); // another launcher may have them now
  };
  try {
    return await launch(options, log, children, stopAll, held);
  } catch (err) {
    await stopAll(); // a failed start leaves nothing running
    throw err;
  }
}

async function launch(
  options: LaunchOptions,
  log: SupervisorLog,
  children: { role: ProcessEntry['role']; child: SupervisedChild }[],
  stopAll: () => Promise<void>,
  held: { close(): void }[],
): Promise<LocalCluster> {
  const { dataDir } = options;
  // The ingest nodes and workers read STREAM_PARTITIONS from the environment they inherit.
  const env = options.streamPartitions === undefined ? options.env : { ...options.env, STREAM_PARTITIONS: String(options.streamPartitions) };
  mkdirSync(dataDir, { recursive: true });
  if (!hasSetpriv()) log.warn('setpriv (util-linux) not found: nats-server and PostgreSQL would outlive a launcher killed with -9');
  const localSecrets = loadLocalSecrets(dataDir);
  // The key that encrypts destination and plugin secrets: the environment's, else the data dir's.
  const secretKey = env.SPATE_SECRET_KEY || localSecrets.secretKey;
  const preferred: Record<string, number> = { capture: 8000, admin: 8010, postgres: 5433 };
  for (let i = 1; i <= options.workers; i++) preferred[`worker${i}`] = 8019 + i;
  for (let i = 1; i <= options.ingest; i++) preferred[`ingestMetrics${i}`] = 8030 + i;
  for (let i = 1; i <= options.natsNodes; i++) {
    preferred[`nats${i}`] = 4221 + i;
    preferred[`natsMonitor${i}`] = 8221 + i;
    if (options.natsNodes > 1) preferred[`natsRoute${i}`] = 6221 + i;
  }
  const ports = await allocatePorts(dataDir, preferred);
  const processes = new Map<string, ProcessEntry>();
  const supervised = (spec: ChildSpec) => new SupervisedChild(spec, log, options.formatLine);
  // Filled in once everything is up; until then restarts need not rewrite cluster.json.
  const written: { cluster?: ClusterFile } = {};
  const track = (role: ProcessEntry['role'], child: SupervisedChild, extra: Record<string, unknown> = {}) => {
    children.push({ role, child });
    child.onStart = (pid) => {
      processes.set(child.spec.name, { role, pid, name: child.spec.name, ...extra });
      if (written.cluster) writeClusterFile({ ...written.cluster, processes: [...processes.values()] }, clusterFilePath(dataDir));
    };
    child.start();
  };

  // NATS: a private server (or a 3-node JetStream cluster) unless NATS_URL points elsewhere. Each
  // deployable connects as its own user (deploy/nats/auth.conf); cluster.json gets the operator.
  let natsUrl = env.NATS_URL;
  const natsPasswords: Partial<Record<NatsRole | 'operator', string>> = {};
  if (natsUrl) {
    // Someone else's NATS: the roles' passwords, if given, in the variables its auth.conf reads.
    for (const user of [...NATS_ROLES, 'operator'] as const) natsPasswords[user] = env[`SPATE_NATS_${user.toUpperCase()}_PASSWORD`];
  } else {
    const auth = localSecrets.nats;
    Object.assign(natsPasswords, auth.passwords);
    const urls: string[] = [];
    const monitors: string[] = [];
    const routes = Array.from({ length: options.natsNodes }, (_, i) => ports[`natsRoute${i + 1}`]!);
    for (let i = 1; i <= options.natsNodes; i++) {
      const dir = join(dataDir, 'nats', `n${i}`);
      mkdirSync(dir, { recursive: true });
      const configPath = join(dir, 'nats.conf');
      writeFileSync(
        configPath,
        natsConfigText({
          dir,
          port: ports[`nats${i}`]!,
          monitorPort: ports[`natsMonitor${i}`]!,
          serverName: `spate-n${i}`,
          cluster: options.natsNodes > 1 ? { name: 'spate', port: routes[i - 1]!, routePorts: routes.filter((_, j) => j !== i - 1) } : undefined,
          auth,
        }),
        { mode: 0o600 },
      );
      chmodSync(configPath, 0o600); // it holds the route password
      urls.push(`nats://127.0.0.1:${ports[`nats${i}`]}`);
      monitors.push(`http://127.0.0.1:${ports[`natsMonitor${i}`]}`);
      const natsEnv = { ...env, ...natsServerEnv(auth) };
      const child = supervised({ name: `nats-${i}`, command: env.NATS_SERVER_BIN ?? 'nats-server', args: ['-c', configPath], env: natsEnv, exitWithLauncher: 'SIGTERM' });
      track('nats', child, { port: ports[`nats${i}`], monitorPort: ports[`natsMonitor${i}`], dir });
    }
    for (const m of monitors) await waitFor(`nats-server at ${m}`, async () => (await fetch(`${m}/healthz`).catch(() => undefined))?.ok === true, 30_000);
    if (options.natsNodes > 1) await waitForJetStreamLeader(monitors);
    natsUrl = urls.join(',');
  }
  const replicas = options.natsNodes > 1 ? 3 : 1;
  /** NATS_USER / NATS_PASSWORD of a role's processes (nothing to add when its password is unknown). */
  const natsCredentials = (role: NatsRole): Record<string, string> => {
    const password = natsPasswords[role];
    return password ? { NATS_USER: NATS_USERS[role], NATS_PASSWORD: password } : {};
  };

  // PostgreSQL: a private server under the data dir unless DATABASE_URL points elsewhere.
  let databaseUrl = env.DATABASE_URL;
  if (!databaseUrl) {
    const pgDir = placeDataDir(join(dataDir, 'postgres'));
    if (pgDir !== join(dataDir, 'postgres')) log.info(`PostgreSQL data in ${pgDir} (the postgres user cannot reach ${dataDir})`);
    const server = new PostgresServer({ dataDir: pgDir, port: ports.postgres!, durable: true });
    await server.init();
    const pgCommand = server.foregroundCommand();
    // SIGINT is PostgreSQL's fast shutdown (a clean one: a checkpoint, no recovery at the next start).
    const pgChild = supervised({ name: 'postgres', ...pgCommand, env, stopSignal: 'SIGINT', exitWithLauncher: 'SIGINT' });
    track('postgres', pgChild, { port: ports.postgres, dir: pgDir });
    await server.waitReady();
    databaseUrl = await server.createDatabase('spate');
  }

  // First start: a user, an organization, project 1 and a personal API key with scope `*`.
  // The project's key goes into the spate-projects KV bucket, where ingest nodes find it.
  const boot = await bootstrap({
    ...env,
    DATABASE_URL: databaseUrl,
    NATS_URL: natsUrl,
    ...natsCredentials('admin'),
    SPATE_DATA_DIR: dataDir,
    PROJECTS_KV_REPLICAS: String(replicas),
  });

  const adminHost = env.ADMIN_HOST ?? '127.0.0.1';
  const adminUrl = `http://${adminHost === '0.0.0.0' ? '127.0.0.1' : adminHost}:${ports.admin}`;
  // The live page (admin's GET /) reads every ingest node's and worker's /metrics.
  const host = env.CAPTURE_HOST ?? '127.0.0.1';
  const reachableHost = host === '0.0.0.0' ? '127.0.0.1' : host;
  const metricsUrls = [
    ...Array.from({ length: options.ingest }, (_, i) => `http://${reachableHost}:${ports[`ingestMetrics${i + 1}`]}`),
    ...Array.from({ length: options.workers }, (_, i) => `http://127.0.0.1:${ports[`worker${i + 1}`]}`),
  ];
  const adminEnv = { ...env, CLUSTER_METRICS_URLS: metricsUrls.join(','), DATABASE_URL: databaseUrl, NATS_URL: natsUrl, ...natsCredentials('admin'), SPATE_SECRET_KEY: secretKey, ADMIN_PORT: String(ports.admin), ADMIN_HOST: adminHost, PROJECTS_KV_REPLICAS: String(replicas), PIPELINE_REPLICAS: String(replicas) };
  track('admin', supervised({ name: 'admin', ...nodeCommand('../../admin/main'), env: adminEnv, exitWithLauncher: 'lifeline' }), { port: ports.admin });

  // Ingest nodes share one port: the launcher binds the socket and every node (restarts too)
  // inherits it as fd 3 and accepts from it (Node 20 cannot listen with SO_REUSEPORT).
  const captureUrl = `http://${reachableHost}:${ports.capture}`;
  const captureSocket = bindCaptureSocket(host, ports.capture!);
  held.push(captureSocket);
  const ingestEnv = {
    ...env,
    NATS_URL: natsUrl,
    ...natsCredentials('ingest'),
    CAPTURE_PORT: String(ports.capture),
    CAPTURE_HOST: host,
    CAPTURE_LISTEN_FD: '3',
    STREAM_REPLICAS: String(replicas),
  };
  for (let i = 1; i <= options.ingest; i++) {
    const metricsPort = ports[`ingestMetrics${i}`]!;
    const spec = {
      name: `ingest-${i}`,
      ...nodeCommand('../../ingest/main'),
      env: { ...ingestEnv, INGEST_METRICS_PORT: String(metricsPort) },
      inheritFds: [captureSocket.fd],
      exitWithLauncher: 'lifeline' as const,
    };
    track('ingest', supervised(spec), { port: ports.capture, metricsPort });
  }
  await waitFor(`ingest at ${captureUrl}`, async () => (await fetch(`${captureUrl}/_ready`).catch(() => undefined))?.ok === true, 60_000);

  // Workers share the shards through leases; each serves /metrics, /_health, /_ready on its own port.
  const workerUrls: string[] = [];
  for (let i = 1; i <= options.workers; i++) {
    const port = ports[`worker${i}`]!;
    // A local cluster exports to local servers: destinations on loopback are allowed (ARCHITECTURE.md).
    const workerEnv = { EXPORT_EGRESS_ALLOW: 'loopback', PLUGIN_EGRESS_ALLOW: 'loopback', ...env, NATS_URL: natsUrl, ...natsCredentials('worker'), SPATE_SECRET_KEY: secretKey, DATABASE_URL: databaseUrl, NATS_REPLICAS: String(replicas), WORKER_METRICS_PORT: String(port) };
    track('worker', supervised({ name: `worker-${i}`, ...nodeCommand('../../workers/main'), env: workerEnv, exitWithLauncher: 'lifeline' }), {
      metricsPort: port,
    });
    workerUrls.push(`http://127.0.0.1:${port}`);
  }
  for (const url of workerUrls) {
    await waitFor(`worker at ${url}`, async () => (await fetch(`${url}/_ready`).catch(() => undefined))?.ok === true, 60_000);
  }
  await waitFor(`admin at ${adminUrl}`, async () => (await fetch(`${adminUrl}/_health`).catch(() => undefined))?.ok === true, 60_000);

  const cluster: ClusterFile = {
    captureUrl,
    adminUrl,
    natsUrl,
    ...(natsPasswords.operator ? { natsUser: NATS_USERS.operator, natsPassword: natsPasswords.operator } : {}),
    databaseUrl,
    organizationId: boot.organizationId,
    projectId: boot.projectId,
    projectApiKey: boot.projectApiKey,
    personalApiKey: boot.personalApiKey,
    processes: [...processes.values()],
  };
  writeClusterFile(cluster, clusterFilePath(dataDir));
  written.cluster = cluster;

  let stopped: Promise<void> | undefined;
  return { cluster, stop: () => (stopped ??= stopAll()) };
}

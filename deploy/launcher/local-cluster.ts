// `npm start`: the whole system on one machine, supervised. Starts in dependency order and
// stops in the reverse one: ingest nodes → NATS.
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Kvm } from '@nats-io/kv';
import {
  clusterFilePath,
  connectNats,
  PROJECTS_BUCKET,
  runtimeModule,
  writeClusterFile,
  type ClusterFile,
} from '../../lib/index.js';
import { natsConfigText, waitForJetStreamLeader } from '../local/nats-server.js';
import { waitFor } from '../local/wait.js';
import { allocatePorts } from './ports.js';
import { SupervisedChild, type SupervisorLog } from './supervisor.js';

export interface LaunchOptions {
  dataDir: string;
  natsNodes: 1 | 3;
  ingest: number;
  env: NodeJS.ProcessEnv;
}

export interface LocalCluster {
  cluster: ClusterFile;
  stop(): Promise<void>;
}

type ProcessEntry = NonNullable<ClusterFile['processes']>[number];

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

function base62(bytes: number): string {
  let out = '';
  for (const b of randomBytes(bytes)) out += BASE62[b % 62];
  return out;
}

/** Runs a Node deployable's main (built JS, or TypeScript through tsx under tests). */
function nodeCommand(relativeMain: string): { command: string; args: string[] } {
  const entry = runtimeModule(import.meta.url, relativeMain);
  return { command: process.execPath, args: [...entry.execArgv, entry.path] };
}

interface DevProject {
  projectId: number;
  organizationId: string;
  projectApiKey: string;
}

/** Until the admin server owns projects: one development project, its key kept in the data dir. */
function devProject(dataDir: string): DevProject {
  const file = join(dataDir, 'dev-project.json');
  if (existsSync(file)) return JSON.parse(readFileSync(file, 'utf8')) as DevProject;
  const project = { projectId: 1, organizationId: 'development', projectApiKey: `phc_${base62(32)}` };
  writeFileSync(file, JSON.stringify(project, null, 2) + '\n', { mode: 0o600 });
  return project;
}

export async function startLocalCluster(options: LaunchOptions, log: SupervisorLog): Promise<LocalCluster> {
  const { dataDir, env } = options;
  mkdirSync(dataDir, { recursive: true });
  const preferred: Record<string, number> = { capture: 8000 };
  for (let i = 1; i <= options.natsNodes; i++) {
    preferred[`nats${i}`] = 4221 + i;
    preferred[`natsMonitor${i}`] = 8221 + i;
    if (options.natsNodes > 1) preferred[`natsRoute${i}`] = 6221 + i;
  }
  const ports = await allocatePorts(dataDir, preferred);
  const processes = new Map<string, ProcessEntry>();
  const children: { role: ProcessEntry['role']; child: SupervisedChild }[] = [];
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

  // NATS: a private server (or a 3-node JetStream cluster) unless NATS_URL points elsewhere.
  let natsUrl = env.NATS_URL;
  if (!natsUrl) {
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
        }),
      );
      urls.push(`nats://127.0.0.1:${ports[`nats${i}`]}`);
      monitors.push(`http://127.0.0.1:${ports[`natsMonitor${i}`]}`);
      const child = new SupervisedChild({ name: `nats-${i}`, command: env.NATS_SERVER_BIN ?? 'nats-server', args: ['-c', configPath], env }, log);
      track('nats', child, { port: ports[`nats${i}`], monitorPort: ports[`natsMonitor${i}`], dir });
    }
    for (const m of monitors) await waitFor(`nats-server at ${m}`, async () => (await fetch(`${m}/healthz`).catch(() => undefined))?.ok === true, 30_000);
    if (options.natsNodes > 1) await waitForJetStreamLeader(monitors);
    natsUrl = urls.join(',');
  }
  const replicas = options.natsNodes > 1 ? 3 : 1;

  // The development project's key, published where ingest nodes look for project keys.
  const project = devProject(dataDir);
  const nc = await connectNats(natsUrl, 'spate-launcher');
  const kv = await new Kvm(nc).create(PROJECTS_BUCKET, { history: 1, replicas });
  await kv.put(project.projectApiKey, JSON.stringify({ projectId: project.projectId, organizationId: project.organizationId }));
  await nc.close();

  // Ingest nodes share one port: uWS listens with SO_REUSEPORT and the kernel spreads connections.
  const host = env.CAPTURE_HOST ?? '127.0.0.1';
  const captureUrl = `http://${host === '0.0.0.0' ? '127.0.0.1' : host}:${ports.capture}`;
  const ingestEnv = { ...env, NATS_URL: natsUrl, CAPTURE_PORT: String(ports.capture), CAPTURE_HOST: host, STREAM_REPLICAS: String(replicas) };
  for (let i = 1; i <= options.ingest; i++) {
    track('ingest', new SupervisedChild({ name: `ingest-${i}`, ...nodeCommand('../../ingest/main'), env: ingestEnv }, log), { port: ports.capture });
  }
  await waitFor(`ingest at ${captureUrl}`, async () => (await fetch(`${captureUrl}/_ready`).catch(() => undefined))?.ok === true, 60_000);

  const cluster: ClusterFile = {
    captureUrl,
    natsUrl,
    projectId: project.projectId,
    projectApiKey: project.projectApiKey,
    processes: [...processes.values()],
  };
  writeClusterFile(cluster, clusterFilePath(dataDir));
  written.cluster = cluster;

  let stopped: Promise<void> | undefined;
  const stop = () =>
    (stopped ??= (async () => {
      // Reverse dependency order: nothing that publishes outlives NATS.
      for (const role of ['ingest', 'nats'] as const) {
        await Promise.all(children.filter((c) => c.role === role).map((c) => c.child.stop()));
      }
    })());
  return { cluster, stop };
}

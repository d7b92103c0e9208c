// Runs a nats-server with JetStream as a child process: used by the local launcher
// (`npm start`) and by the test kit, so both exercise the same configuration.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, openSync, closeSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { NATS_USERS } from '../../lib/index.js';
import { withParentDeathSignal } from './parent-death.js';
import { freePort } from './ports.js';
import { waitFor } from './wait.js';

/** The users of deploy/nats/auth.conf whose passwords nats-server reads from its environment. */
export type NatsUserName = keyof typeof NATS_USERS;

export interface NatsServerAuth {
  /** Password of each user of deploy/nats/auth.conf. */
  passwords: Readonly<Record<NatsUserName, string>>;
  /** Password of the route user the nodes of a cluster connect to each other with. */
  routePassword: string;
}

/** The user nodes of a cluster authenticate their routes with. */
export const NATS_ROUTE_USER = 'spate-route';

const LETTERS = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ';
const ALPHANUMERIC = `${LETTERS}0123456789`;

/**
 * A random password of 32 letters and digits (~190 bits) that starts with a letter: nats-server
 * parses a variable taken from its environment as a config value, so one starting with a digit
 * could read as a number or a date. Route URLs carry it too, unescaped.
 */
export function randomPassword(): string {
  const bytes = randomBytes(64);
  let out = LETTERS[bytes[0]! % LETTERS.length]!;
  // 248 = 4 × 62: bytes at or above it are skipped, so every character is equally likely.
  for (let i = 1; i < bytes.length && out.length < 32; i++) if (bytes[i]! < 248) out += ALPHANUMERIC[bytes[i]! % 62];
  return out.length === 32 ? out : randomPassword();
}

/** Fresh random passwords for every user, and the routes. */
export function generateNatsServerAuth(): NatsServerAuth {
  const passwords = Object.fromEntries(Object.keys(NATS_USERS).map((u) => [u, randomPassword()])) as Record<NatsUserName, string>;
  return { passwords, routePassword: randomPassword() };
}

/** The environment deploy/nats/auth.conf reads the passwords from (SPATE_NATS_<USER>_PASSWORD). */
export function natsServerEnv(auth: NatsServerAuth): Record<string, string> {
  return Object.fromEntries(Object.entries(auth.passwords).map(([user, password]) => [`SPATE_NATS_${user.toUpperCase()}_PASSWORD`, password]));
}

export interface NatsNodeOptions {
  /** Directory for the config file, the log and the JetStream store. */
  dir: string;
  host?: string;
  port: number;
  /** HTTP monitoring port (healthz, jsz). */
  monitorPort: number;
  serverName: string;
  /** Largest message a client may publish. Ingest packs events into messages up to this size. */
  maxPayload?: number;
  /** Bytes the server buffers for a slow client before cutting it off (base.conf's max_pending otherwise). */
  maxPending?: number;
  /**
   * Cluster membership: the other nodes' route ports on `host` (one machine), or their `host:port`
   * addresses in `routes` (nodes on several hosts). `advertise`: the `host:port` the other nodes
   * reach this one's routes at, when that is not where it listens (a relay in front of it).
   */
  cluster?: { name: string; port: number; routePorts?: number[]; routes?: string[]; advertise?: string };
  /** The `host:port` clients are told to reach this node at, when not where it listens. */
  clientAdvertise?: string;
  /** Users and passwords (deploy/nats/auth.conf); every client must authenticate. */
  auth: NatsServerAuth;
  /** TLS for client connections (required when set): the server's certificate and key (PEM files). */
  tls?: { certFile: string; keyFile: string };
  binary?: string;
}

/** max_payload of deploy/nats/base.conf (8MB there: nats-server reads MB as 2^20). */
export const DEFAULT_MAX_PAYLOAD = 8 * 1024 * 1024;

/**
 * deploy/nats/, the NATS configuration shared by the launcher, the test kit, compose and Helm.
 * From source this module is deploy/local/nats-server.ts; built, it is dist/deploy/local/nats-server.js
 * and the .conf files, which tsc does not copy, are read from the source tree.
 */
export function natsConfigDir(): string {
  const candidates = ['../nats/', '../../../deploy/nats/'].map((rel) => fileURLToPath(new URL(rel, import.meta.url)));
  const dir = candidates.find((d) => existsSync(join(d, 'base.conf')));
  if (!dir) throw new Error(`deploy/nats/base.conf not found (looked in ${candidates.join(', ')})`);
  return dir;
}

/**
 * A node's config: deploy/nats/base.conf copied in (a self-contained file, wherever the data dir
 * is; an `include` would have to be relative to it), then this node's own settings. Later keys
 * win in nats-server configs, so `maxPayload` overrides the base.
 */
export function natsConfigText(o: NatsNodeOptions): string {
  const host = o.host ?? '127.0.0.1';
  const lines = [
    `# Written by deploy/local/nats-server.ts for ${o.serverName} at every start.`,
    `# --- deploy/nats/base.conf ---`,
    readFileSync(join(natsConfigDir(), 'base.conf'), 'utf8').trimEnd(),
    `# --- deploy/nats/auth.conf (passwords from the environment: natsServerEnv) ---`,
    readFileSync(join(natsConfigDir(), 'auth.conf'), 'utf8').trimEnd(),
    `# --- this node ---`,
    `server_name: ${JSON.stringify(o.serverName)}`,
    `listen: "${host}:${o.port}"`,
    `http: "${host}:${o.monitorPort}"`,
  ];
  if (o.clientAdvertise) lines.push(`client_advertise: ${JSON.stringify(o.clientAdvertise)}`);
  if (o.tls) lines.push(`tls { cert_file: ${JSON.stringify(o.tls.certFile)}, key_file: ${JSON.stringify(o.tls.keyFile)} }`);
  if (o.maxPayload !== undefined) lines.push(`max_payload: ${o.maxPayload}`);
  if (o.maxPending !== undefined) lines.push(`max_pending: ${o.maxPending}`);
  lines.push(
    `jetstream {`,
    `  store_dir: ${JSON.stringify(o.dir)}`, // the server adds its own jetstream/ below it
    `}`,
  );
  if (o.cluster) {
    // Routes bypass client authorization: without their own credentials anyone who reaches the
    // route port would receive every message.
    const route = `${NATS_ROUTE_USER}:${o.auth.routePassword}`;
    const peers = o.cluster.routes ?? (o.cluster.routePorts ?? []).map((p) => `${host}:${p}`);
    lines.push(
      `cluster {`,
      `  name: ${JSON.stringify(o.cluster.name)}`,
      `  listen: "${host}:${o.cluster.port}"`,
      ...(o.cluster.advertise ? [`  advertise: ${JSON.stringify(o.cluster.advertise)}`] : []),
      `  authorization { user: ${JSON.stringify(NATS_ROUTE_USER)}, password: ${JSON.stringify(o.auth.routePassword)} }`,
      `  routes: [${peers.map((peer) => `"nats-route://${route}@${peer}"`).join(', ')}]`,
      `}`,
    );
  }
  return lines.join('\n') + '\n';
}

/** nats-server ended before it answered /healthz (a port taken meanwhile, a bad config): its last log lines say why. */
export class NatsServerExited extends Error {
  readonly code = 'NATS_SERVER_EXITED';
  constructor(
    serverName: string,
    exitCode: number,
    readonly logTail: string,
  ) {
    super(`nats-server ${serverName} exited with ${exitCode}:\n${logTail}`);
  }

  /** The port it was given was taken between choosing it and binding it: starting again on other ports helps. */
  get portTaken(): boolean {
    return /address already in use/i.test(this.logTail);
  }
}

function logTail(path: string, lines = 5): string {
  try {
    return readFileSync(path, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

export class NatsNode {
  private child: ChildProcess | undefined;
  private exited: Promise<void> = Promise.resolve();

  constructor(readonly options: NatsNodeOptions) {}

  get url(): string {
    return `nats://${this.options.host ?? '127.0.0.1'}:${this.options.port}`;
  }

  get monitorUrl(): string {
    return `http://${this.options.host ?? '127.0.0.1'}:${this.options.monitorPort}`;
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  get running(): boolean {
    return this.child !== undefined && this.child.exitCode === null && this.child.signalCode === null;
  }

  /** Starts the server and resolves once it answers /healthz. */
  async start(): Promise<void> {
    if (this.running) return;
    const o = this.options;
    mkdirSync(o.dir, { recursive: true });
    const configPath = join(o.dir, 'nats.conf');
    writeFileSync(configPath, natsConfigText(o), { mode: 0o600 });
    const log = openSync(join(o.dir, 'nats.log'), 'a');
    try {
      // Ends with this process even when it is killed with -9 (a test run cut short).
      const { command, args } = withParentDeathSignal('SIGTERM', o.binary ?? process.env.NATS_SERVER_BIN ?? 'nats-server', ['-c', configPath]);
      this.child = spawn(command, args, {
        stdio: ['ignore', log, log],
        env: { ...process.env, ...natsServerEnv(o.auth) },
      });
    } finally {
      closeSync(log);
    }
    const child = this.child;
    // A test process that exits without stopping its servers must not leave them running.
    const killOnExit = () => child.kill('SIGKILL');
    process.once('exit', killOnExit);
    this.exited = new Promise((resolve) =>
      child.once('exit', () => {
        process.off('exit', killOnExit);
        resolve();
      }),
    );
    child.once('error', () => undefined);
    await waitFor(`nats-server ${o.serverName} on port ${o.port}`, async () => {
      if (child.exitCode !== null) throw new NatsServerExited(o.serverName, child.exitCode, logTail(join(o.dir, 'nats.log')));
      const res = await fetch(`${this.monitorUrl}/healthz`).catch(() => undefined);
      return res?.ok === true;
    });
  }

  /** Graceful stop (SIGTERM → lame duck), waiting for exit. */
  async stop(): Promise<void> {
    if (!this.running) return;
    this.child!.kill('SIGTERM');
    const timer = setTimeout(() => this.child?.kill('SIGKILL'), 10_000);
    await this.exited;
    clearTimeout(timer);
  }

  /** kill -9: what the fault tests do. */
  async kill(): Promise<void> {
    if (!this.running) return;
    this.child!.kill('SIGKILL');
    await this.exited;
  }

  onExit(listener: (code: number | null, signal: NodeJS.Signals | null) => void): void {
    this.child?.once('exit', listener);
  }
}

/**
 * Resolves once the JetStream meta group of a cluster has a leader and every node in it is current,
 * so streams of any replica count can be created (nats-server 2.10 answers "no suitable peers for
 * placement" to an R3 stream while a peer is still catching up with the meta leader).
 */
export async function waitForJetStreamLeader(monitorUrls: readonly string[]): Promise<void> {
  await waitFor('JetStream meta leader with every node current', async () => {
    for (const url of monitorUrls) {
      const res = await fetch(`${url}/jsz`).catch(() => undefined);
      if (!res?.ok) continue;
      const meta = ((await res.json()) as { meta_cluster?: { leader?: string; replicas?: { current?: boolean }[] } }).meta_cluster;
      if (!meta?.leader) continue;
      if (monitorUrls.length <= 1) return true;
      // Only the leader's answer lists the other nodes and how current they are.
      if ((meta.replicas ?? []).filter((r) => r.current).length >= monitorUrls.length - 1) return true;
    }
    return false;
  }, 30_000);
}

/**
 * Starts `size` nodes of one JetStream cluster on free loopback ports, in `root`/n1, n2 …, all with
 * `auth`; resolves once JetStream has a meta leader. For tests and benchmarks (the launcher picks
 * its own ports).
 */
export async function startNatsNodes(root: string, size: number, auth: NatsServerAuth, options: { maxPayload?: number; clusterName?: string } = {}): Promise<NatsNode[]> {
  const routePorts: number[] = [];
  for (let i = 0; i < size; i++) routePorts.push(await freePort());
  const nodes: NatsNode[] = [];
  for (let i = 0; i < size; i++) {
    nodes.push(
      new NatsNode({
        dir: join(root, `n${i + 1}`),
        port: await freePort(),
        monitorPort: await freePort(),
        serverName: `n${i + 1}`,
        maxPayload: options.maxPayload,
        cluster: { name: options.clusterName ?? 'spate-test', port: routePorts[i]!, routePorts: routePorts.filter((_, j) => j !== i) },
        auth,
      }),
    );
  }
  await Promise.all(nodes.map((n) => n.start()));
  await waitForJetStreamLeader(nodes.map((n) => n.monitorUrl));
  return nodes;
}

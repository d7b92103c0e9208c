// Runs a nats-server with JetStream as a child process: used by the local launcher
// (`npm start`) and by the test kit, so both exercise the same configuration.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, openSync, closeSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { waitFor } from './wait.js';

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
  cluster?: { name: string; port: number; routePorts: number[] };
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
    `# --- this node ---`,
    `server_name: ${JSON.stringify(o.serverName)}`,
    `listen: "${host}:${o.port}"`,
    `http: "${host}:${o.monitorPort}"`,
  ];
  if (o.maxPayload !== undefined) lines.push(`max_payload: ${o.maxPayload}`);
  if (o.maxPending !== undefined) lines.push(`max_pending: ${o.maxPending}`);
  lines.push(
    `jetstream {`,
    `  store_dir: ${JSON.stringify(o.dir)}`, // the server adds its own jetstream/ below it
    `}`,
  );
  if (o.cluster) {
    lines.push(
      `cluster {`,
      `  name: ${JSON.stringify(o.cluster.name)}`,
      `  listen: "${host}:${o.cluster.port}"`,
      `  routes: [${o.cluster.routePorts.map((p) => `"nats-route://${host}:${p}"`).join(', ')}]`,
      `}`,
    );
  }
  return lines.join('\n') + '\n';
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
    writeFileSync(configPath, natsConfigText(o));
    const log = openSync(join(o.dir, 'nats.log'), 'a');
    try {
      this.child = spawn(o.binary ?? process.env.NATS_SERVER_BIN ?? 'nats-server', ['-c', configPath], {
        stdio: ['ignore', log, log],
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
      if (child.exitCode !== null) throw new Error(`nats-server exited with ${child.exitCode}; see ${o.dir}/nats.log`);
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

/** Resolves once the JetStream meta group of a cluster has a leader, so streams can be created. */
export async function waitForJetStreamLeader(monitorUrls: readonly string[]): Promise<void> {
  await waitFor('JetStream meta leader', async () => {
    for (const url of monitorUrls) {
      const res = await fetch(`${url}/jsz`).catch(() => undefined);
      if (!res?.ok) continue;
      const body = (await res.json()) as { meta_cluster?: { leader?: string } };
      if (body.meta_cluster?.leader) return true;
    }
    return false;
  }, 30_000);
}

// The multi-host rig: Spate as it runs on separate machines, each host a network namespace
// (netns.ts, topology.ts), each process supervised as systemd or Kubernetes would (restarted when
// it exits; NATS nodes also by a liveness probe), reached by the test through the gateway.
import { execFile, execFileSync } from 'node:child_process';
import { chmodSync, closeSync, cpSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, unlinkSync, writeFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import pg from 'pg';
import { NATS_USERS } from '../../lib/index.js';
import { loadLocalSecrets } from '../../deploy/launcher/local-secrets.js';
import { lineFormatter } from '../../deploy/launcher/log-lines.js';
import { SupervisedChild, type ChildSpec, type LauncherDeath } from '../../deploy/launcher/supervisor.js';
import { natsServerEnv, waitForJetStreamLeader } from '../../deploy/local/nats-server.js';
import { PostgresServer } from '../../deploy/local/postgres.js';
import { waitFor } from '../../deploy/local/wait.js';
import { ok, pidAlive, postgresAnswers, shardsCovered, workerShards } from '../faults/probes.js';
import { waitUntilNoneFail } from '../faults/scenario.js';
import { CpuLimit, cpuLimitSupport } from './cpu-limit.js';
import { Gateway } from './gateway.js';
import { NS_PREFIX, removeStaleRigs, RigNetwork, RUN_DIRS } from './netns.js';
import { adminEnv, bootstrapEnv, buildDeployables, builtEntry, haproxyConfig, ingestEnv, nats2LinkRoutes, natsNodeConfig, workerEnv, type RigSecrets } from './services.js';
import type { WriteRateOptions, WriteRateRound } from './write-rate.js';
import { ADDRESS, INGEST_HOSTS, LIVENESS, NATS2_LINK, NATS_HOSTS, NETWORK, PORT, WORKER_HOSTS, type NatsHost } from './topology.js';

const run = promisify(execFile);

export type ServiceRole = 'nats' | 'postgres' | 'admin' | 'ingest' | 'haproxy' | 'worker' | 'relay';

export interface Service {
  name: string;
  host: string;
  role: ServiceRole;
  child: SupervisedChild;
}

export interface RigOptions {
  shardCount?: number;
  /** Size of the tmpfs nats3 keeps its JetStream store on (the disk-full fault fills it). */
  nats3StoreBytes?: number;
  log?: (message: string) => void;
}


const RELAY_MAIN = fileURLToPath(new URL('./relay-main.ts', import.meta.url));
const WRITE_RATE_MAIN = fileURLToPath(new URL('./write-rate.ts', import.meta.url));
const CHILD_STOP_MS = 10_000;

export interface LivenessRestart {
  host: NatsHost;
  at: number;
}

export class Rig {
  readonly services: Service[] = [];
  readonly livenessRestarts: LivenessRestart[] = [];
  readonly dir: string;
  readonly net: RigNetwork;
  readonly gateway: Gateway;
  private secrets!: RigSecrets;
  private stopping = false;
  private livenessTimer: NodeJS.Timeout | undefined;
  private readonly storeMount: string;
  private readonly fillFile: string;
  private readonly logDir: string;
  private readonly logFds: number[] = [];
  private readonly removeOnExit = () => this.removeNow();
  private readonly onSignal = (signal: NodeJS.Signals) => {
    this.removeNow();
    process.exit(signal === 'SIGINT' ? 130 : 143);
  };
  project!: { projectId: number; projectApiKey: string; personalApiKey: string };

  private constructor(private readonly options: RigOptions) {
    const stale = removeStaleRigs();
    if (stale.length > 0) this.log(`removed ${stale.length} namespaces left by an earlier run: ${stale.join(', ')}`);
    this.dir = mkdtempSync(join(RUN_DIRS, `${NS_PREFIX}${process.pid}-`));
    chmodSync(this.dir, 0o711); // PostgreSQL runs as `postgres`
    this.logDir = join(this.dir, 'logs');
    mkdirSync(this.logDir);
    this.storeMount = join(this.dir, 'nats3-store');
    this.fillFile = join(this.storeMount, 'filler');
    process.once('exit', this.removeOnExit);
    process.once('SIGTERM', this.onSignal);
    process.once('SIGINT', this.onSignal);
    this.net = RigNetwork.create(NETWORK);
    this.gateway = new Gateway(join(this.dir, 'gateway.sock'));
  }

  private log(message: string): void {
    (this.options.log ?? ((m: string) => console.log(`[rig] ${m}`)))(message);
  }

  /** Builds the network and starts the gateway and the NATS cluster (startSpate() the rest). */
  static async start(options: RigOptions = {}): Promise<Rig> {
    if (process.getuid?.() !== 0) throw new Error('the multi-host rig needs root: network namespaces, iptables, a tmpfs and cgroups (CI runs it as root)');
    buildDeployables();
    const rig = new Rig(options);
    try {
      await rig.boot();
      return rig;
    } catch (err) {
      const logs = rig.tailLogs();
      await rig.stop();
      throw new Error(`the rig's network and NATS did not start: ${err instanceof Error ? err.message : String(err)}\n${logs}`, { cause: err });
    }
  }

  private supervise(name: string, host: string, role: ServiceRole, command: string, args: string[], env: NodeJS.ProcessEnv, death: LauncherDeath | undefined, extra: Partial<ChildSpec> = {}): Service {
    const logFd = openSync(join(this.logDir, `${name}.log`), 'a');
    this.logFds.push(logFd);
    const wrapped = this.net.wrap(host, command, args);
    const spec: ChildSpec = { name, ...wrapped, env, exitWithLauncher: death, stopTimeoutMs: CHILD_STOP_MS, ...extra };
    const child = new SupervisedChild(spec, { info: (m) => this.log(m), warn: (m) => this.log(m) }, lineFormatter('json'), (text) => {
      writeSync(logFd, text);
    });
    const service = { name, host, role, child };
    this.services.push(service);
    child.start();
    return service;
  }

  private async boot(): Promise<void> {
    const started = Date.now();
    const local = loadLocalSecrets(this.dir);
    this.secrets = { nats: local.nats, secretKey: local.secretKey };
    const node = process.execPath;

    // The gateway first: every later wait goes through it.
    const socket = join(this.dir, 'gateway.sock');
    this.supervise('gateway', 'client', 'relay', node, ['--import', 'tsx', RELAY_MAIN, JSON.stringify([{ listen: { path: socket }, target: 'header' }])], { PATH: process.env.PATH }, 'SIGTERM');
    await waitFor('the gateway relay', () => existsSync(socket), 30_000, 100);

    // NATS: three nodes, nats2 behind its link relay, nats3's store on a tmpfs of its own.
    this.supervise('nats2-link', NATS2_LINK.link, 'relay', node, ['--import', 'tsx', RELAY_MAIN, JSON.stringify(nats2LinkRoutes()), this.linkControl], { PATH: process.env.PATH }, 'SIGTERM');
    mkdirSync(this.storeMount);
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${this.options.nats3StoreBytes ?? 1024 ** 3},mode=0700`, 'tmpfs', this.storeMount]);
    for (const host of NATS_HOSTS) {
      const store = host === 'nats3' ? this.storeMount : join(this.dir, host);
      mkdirSync(store, { recursive: true });
      const config = join(this.dir, `${host}.conf`);
      writeFileSync(config, natsNodeConfig(host, store, this.secrets.nats), { mode: 0o600 });
      this.supervise(host, host, 'nats', process.env.NATS_SERVER_BIN ?? 'nats-server', ['-c', config], { PATH: process.env.PATH, ...natsServerEnv(this.secrets.nats) }, 'SIGTERM');
    }
    const monitors = await Promise.all(NATS_HOSTS.map((h) => this.gateway.url('http', ADDRESS[h], PORT.natsMonitor)));
    for (const [i, m] of monitors.entries()) await waitFor(`${NATS_HOSTS[i]} /healthz`, () => ok(`${m}/healthz`), 60_000, 250);
    await waitForJetStreamLeader(monitors);
    this.startLiveness();
    this.log(`NATS ready in ${((Date.now() - started) / 1000).toFixed(1)} s (${this.dir})`);
  }

  /** Starts PostgreSQL, the admin server, the ingest nodes, HAProxy and the workers; resolves when all are ready. */
  async startSpate(): Promise<void> {
    const started = Date.now();
    const node = process.execPath;
    try {
      await this.bootSpate(node);
    } catch (err) {
      throw new Error(`Spate did not start in the rig: ${err instanceof Error ? err.message : String(err)}\n${this.tailLogs()}`, { cause: err });
    }
    this.log(`Spate ready in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  }

  private async bootSpate(node: string): Promise<void> {
    // PostgreSQL on the db host, as the postgres user, reachable from the rig's network.
    const pgServer = new PostgresServer({ dataDir: join(this.dir, 'postgres'), port: PORT.postgres, durable: true, host: ADDRESS.db, trustNetwork: '198.18.0.0/24' });
    await pgServer.init();
    const fg = pgServer.foregroundCommand();
    const asPostgres = fg.uid === undefined ? [fg.command, ...fg.args] : ['setpriv', `--reuid=${fg.uid}`, `--regid=${fg.gid}`, '--clear-groups', '--pdeathsig', 'INT', '--', fg.command, ...fg.args];
    this.supervise('postgres', 'db', 'postgres', asPostgres[0]!, asPostgres.slice(1), { PATH: process.env.PATH }, fg.uid === undefined ? 'SIGINT' : undefined, { stopSignal: 'SIGINT' });
    const pgAdmin = await this.gateway.url('postgres', ADDRESS.db, PORT.postgres, '/postgres');
    await waitFor('PostgreSQL', () => postgresAnswers(pgAdmin), 60_000, 250);
    const client = new pg.Client({ connectionString: pgAdmin });
    await client.connect();
    await client.query('create database spate').finally(() => client.end());

    // First start: the project and keys (spate admin bootstrap, on the db host).
    const { stdout } = await run('ip', ['netns', 'exec', this.net.ns('db'), node, builtEntry('cli/spate.js'), 'admin', 'bootstrap'], { env: bootstrapEnv(this.secrets, this.dir), timeout: 120_000 });
    this.project = JSON.parse(stdout) as Rig['project'];

    this.supervise('admin', 'db', 'admin', node, [builtEntry('admin/main.js')], adminEnv(this.secrets), 'lifeline');
    for (const host of INGEST_HOSTS) this.supervise(host, host, 'ingest', node, [builtEntry('ingest/main.js')], ingestEnv(host, this.secrets), 'lifeline');
    const haproxyCfg = join(this.dir, 'haproxy.cfg');
    writeFileSync(haproxyCfg, haproxyConfig());
    this.supervise('haproxy', 'lb', 'haproxy', 'haproxy', ['-db', '-f', haproxyCfg], { PATH: `${process.env.PATH}:/usr/sbin` }, 'SIGTERM');
    for (const host of WORKER_HOSTS) this.supervise(host, host, 'worker', node, [builtEntry('workers/main.js')], workerEnv(host, this.secrets), 'lifeline');

    await waitUntilNoneFail('the rig', () => this.unhealthy(), 180_000, 500);
  }

  get linkControl(): string {
    return join(this.dir, 'nats2-link.sock');
  }

  captureUrl(): Promise<string> {
    return this.gateway.url('http', ADDRESS.lb, PORT.capture);
  }

  /** A NATS connection as the operator, through the gateway, to all three nodes. */
  async natsConnection(name: string): Promise<NatsConnection> {
    const servers = await Promise.all(NATS_HOSTS.map((h) => this.gateway.url('nats', ADDRESS[h], PORT.nats)));
    return connect({
      servers,
      name,
      user: NATS_USERS.operator,
      pass: this.secrets.nats.passwords.operator,
      // The nodes announce rig addresses, which do not exist here (and would be routed out).
      ignoreClusterUpdates: true,
      maxReconnectAttempts: -1,
      reconnectTimeWait: 250,
    });
  }

  /** Names of the checks that fail now (empty: every process up, ready and serving). */
  async unhealthy(): Promise<string[]> {
    const failing = this.services.filter((s) => !running(s.child)).map((s) => `${s.name} not running`);
    const url = (host: keyof typeof ADDRESS, port: number, path: string) => this.gateway.url('http', ADDRESS[host], port, path);
    const checks: [string, Promise<boolean>][] = [
      ...NATS_HOSTS.map((h): [string, Promise<boolean>] => [`${h} /healthz`, url(h, PORT.natsMonitor, '/healthz').then((u) => ok(u))]),
      ...INGEST_HOSTS.map((h): [string, Promise<boolean>] => [`${h} /_ready`, url(h, PORT.ingestMetrics, '/_ready').then((u) => ok(u))]),
      ['capture (HAProxy) /_ready', url('lb', PORT.capture, '/_ready').then((u) => ok(u))],
      ['admin /_health', url('db', PORT.admin, '/_health').then((u) => ok(u))],
      ['PostgreSQL', this.gateway.url('postgres', ADDRESS.db, PORT.postgres, '/spate').then((u) => postgresAnswers(u))],
    ];
    const owned = await Promise.all(WORKER_HOSTS.map(async (h) => workerShards(await this.gateway.url('http', ADDRESS[h], PORT.worker))));
    if (!shardsCovered(owned, this.options.shardCount ?? 16)) failing.push(`shards not each owned by one ready worker (${JSON.stringify(owned)})`);
    for (const [name, check] of checks) if (!(await check)) failing.push(name);
    return failing;
  }

  /** Restarts by supervisors and liveness probes so far, per service. */
  restarts(): Record<string, number> {
    return Object.fromEntries(this.services.map((s) => [s.name, s.child.restartCount]));
  }

  /** Pids of the processes serving each tier now (PostgreSQL: every process of the db host but admin). */
  pidsByTier(): Record<string, number[]> {
    const of = (role: ServiceRole) => this.services.filter((s) => s.role === role).flatMap((s) => (s.child.pid === undefined ? [] : [s.child.pid]));
    const admin = new Set(of('admin'));
    return {
      ingest: of('ingest'),
      worker: of('worker'),
      nats: of('nats'),
      postgres: this.net.pids('db').filter((p) => !admin.has(p)),
      haproxy: of('haproxy'),
      relays: of('relay'),
    };
  }

  service(name: string): Service {
    const s = this.services.find((x) => x.name === name);
    if (!s) throw new Error(`rig: no service ${name}`);
    return s;
  }

  /** Runs write-rate.ts on the client host against the three nodes; one result per round. */
  async writeRate(options: Omit<WriteRateOptions, 'servers' | 'user' | 'pass' | 'natsPids'>): Promise<WriteRateRound[]> {
    const full: WriteRateOptions = {
      ...options,
      servers: NATS_HOSTS.map((h) => `nats://${ADDRESS[h]}:${PORT.nats}`),
      user: NATS_USERS.operator,
      pass: this.secrets.nats.passwords.operator,
      natsPids: this.pidsByTier().nats!,
    };
    const out = await this.net.exec('client', process.execPath, ['--import', 'tsx', WRITE_RATE_MAIN, JSON.stringify(full)], 300_000);
    return out.trim().split('\n').map((l) => JSON.parse(l) as WriteRateRound);
  }

  /**
   * Runs `fn` with each NATS host held to `cores` of CPU time (a cgroup quota), as if each were a
   * machine of its own; undefined when this machine has no cgroup cpu controller.
   */
  async withNatsCpuBudget<T>(cores: number, fn: () => Promise<T>): Promise<T | undefined> {
    if (!cpuLimitSupport()) return undefined;
    const limits: CpuLimit[] = [];
    try {
      for (const host of NATS_HOSTS) {
        const limit = new CpuLimit(`${NS_PREFIX}${process.pid}-${host}`, cores);
        limits.push(limit);
        limit.add([this.service(host).child.pid!]);
      }
      return await fn();
    } finally {
      for (const l of limits) l.release();
    }
  }

  /** Bytes under each NATS node's store directory (streams, KV buckets, raft logs). */
  storeBytes(): Record<NatsHost, number> {
    const du = (dir: string) => Number(execFileSync('du', ['-sb', dir], { encoding: 'utf8' }).split('\t')[0]);
    return { nats1: du(join(this.dir, 'nats1')), nats2: du(join(this.dir, 'nats2')), nats3: du(this.storeMount) };
  }

  // --- faults ---------------------------------------------------------------------------------

  /** Delays every byte on nats2's link (both ways) by `delayMs` ± `jitterMs`. */
  async shapeNats2Link(delayMs: number, jitterMs: number): Promise<void> {
    const { createConnection } = await import('node:net');
    const answer = await new Promise<string>((resolve, reject) => {
      const s = createConnection(this.linkControl, () => s.write(`${JSON.stringify({ delayMs, jitterMs })}\n`));
      let text = '';
      s.on('data', (d: Buffer) => (text += d.toString()));
      s.on('end', () => resolve(text));
      s.on('error', reject);
    });
    if (!answer.includes('shaped')) throw new Error(`nats2's link relay refused the shape: ${answer}`);
  }

  /**
   * The host is lost: its link goes down (peers hear nothing more, as when a machine dies) and
   * every process in it is killed with -9. Its supervisors do not restart anything until hostBack().
   */
  async loseHost(host: string): Promise<void> {
    const services = this.services.filter((s) => s.host === host);
    for (const s of services) s.child.markStopping();
    await this.net.linkDown(host);
    for (const pid of this.net.pids(host)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone already
      }
    }
    await Promise.all(services.map((s) => s.child.stop()));
  }

  /** The host boots again: link up, its services started in the order they were first. */
  async hostBack(host: string): Promise<void> {
    await this.net.linkUp(host);
    for (const s of this.services.filter((x) => x.host === host)) s.child.start();
  }

  /** Fills nats3's store (a tmpfs) to the last byte (the node keeps writing meanwhile). */
  fillNats3Disk(): number {
    const fd = openSync(this.fillFile, 'w');
    let bytes = 0;
    try {
      for (const size of [1024 * 1024, 4096]) {
        const chunk = Buffer.alloc(size, 1);
        for (;;) {
          try {
            bytes += writeSync(fd, chunk);
          } catch (err) {
            if ((err as NodeJS.ErrnoException).code === 'ENOSPC') break;
            throw err;
          }
        }
      }
    } finally {
      closeSync(fd);
    }
    return bytes;
  }

  freeNats3Disk(): void {
    unlinkSync(this.fillFile);
  }

  /** HTTP status of each monitoring path of a NATS node, asked from its own host ('-' for no answer within 2 s). */
  async probeNats(host: NatsHost, paths: readonly string[]): Promise<string[]> {
    const address = host === 'nats2' ? NATS2_LINK.inner : ADDRESS[host];
    return Promise.all(
      paths.map(async (path) => {
        const url = `http://${address}:${PORT.natsMonitor}${path}`;
        const code = await this.net.exec(host, 'curl', ['-s', '-o', '/dev/null', '-w', '%{http_code}', '-m', '2', url], 10_000).catch(() => '-');
        return code.trim() === '000' ? '-' : code.trim();
      }),
    );
  }

  /**
   * Every NATS node is probed from its own host every 5 s (as a kubelet probes its pod): three
   * LIVENESS.path in a row without a 200 within 2 s and the node is killed, and its supervisor
   * starts it again.
   */
  private startLiveness(): void {
    const failures = new Map<NatsHost, number>();
    const probe = async (host: NatsHost) => {
      const s = this.service(host);
      if (!running(s.child)) {
        failures.set(host, 0);
        return;
      }
      const [code] = await this.probeNats(host, [LIVENESS.path]);
      const n = code === '200' ? 0 : (failures.get(host) ?? 0) + 1;
      failures.set(host, n);
      if (n < LIVENESS.failures) return;
      failures.set(host, 0);
      this.livenessRestarts.push({ host, at: Date.now() });
      this.log(`liveness: ${host} failed ${LIVENESS.failures} probes in a row: restarting it`);
      if (s.child.pid !== undefined) process.kill(s.child.pid, 'SIGKILL');
    };
    const tick = () => {
      if (this.stopping) return;
      void Promise.all(NATS_HOSTS.map((h) => probe(h))).finally(() => {
        if (!this.stopping) this.livenessTimer = setTimeout(tick, LIVENESS.periodMs);
      });
    };
    this.livenessTimer = setTimeout(tick, LIVENESS.periodMs);
  }

  /** The last lines of every log, for a failure message. */
  tailLogs(lines = 15): string {
    const out: string[] = [];
    for (const s of this.services) {
      const file = join(this.logDir, `${s.name}.log`);
      if (!existsSync(file)) continue;
      const tail = readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines);
      out.push(`--- ${s.name} (${s.host}) ---`, ...tail);
    }
    return out.join('\n');
  }

  /** Stops everything in order (clients before servers), then removes the network and files. */
  async stop(): Promise<void> {
    this.stopping = true;
    clearTimeout(this.livenessTimer);
    for (const s of this.services) s.child.markStopping();
    const order: ServiceRole[] = ['ingest', 'haproxy', 'worker', 'admin', 'nats', 'postgres', 'relay'];
    for (const role of order) await Promise.all(this.services.filter((s) => s.role === role).map((s) => s.child.stop()));
    await this.gateway.close();
    this.removeNow();
  }

  /** Synchronous last resort (process exit, signals): kill what runs, remove namespaces, mounts and files. */
  private removeNow(): void {
    this.stopping = true;
    clearTimeout(this.livenessTimer);
    for (const s of this.services) {
      s.child.markStopping();
      if (s.child.pid !== undefined) {
        try {
          process.kill(s.child.pid, 'SIGKILL');
        } catch {
          // gone
        }
      }
    }
    for (const fd of this.logFds.splice(0)) closeSync(fd);
    // MULTIHOST_KEEP_LOGS=DIR: the processes' logs are copied there before the rig's files go.
    if (process.env.MULTIHOST_KEEP_LOGS) cpSync(this.logDir, process.env.MULTIHOST_KEEP_LOGS, { recursive: true });
    this.net.remove([this.storeMount]);
    rmSync(this.dir, { recursive: true, force: true });
    process.off('exit', this.removeOnExit);
    process.off('SIGTERM', this.onSignal);
    process.off('SIGINT', this.onSignal);
  }
}

function running(child: SupervisedChild): boolean {
  return child.pid !== undefined && pidAlive(child.pid);
}

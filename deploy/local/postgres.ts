// Runs a private PostgreSQL server from the distribution's binaries: used by the local
// launcher (`npm start`) and by the test kit. initdb and postgres refuse to run as root, so
// as root every command runs as the `postgres` system user, which must own the data dir.
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { accessSync, appendFileSync, chownSync, constants, existsSync, mkdirSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { waitFor } from './wait.js';

const run = promisify(execFile);

export interface PostgresServerOptions {
  dataDir: string;
  port: number;
  /** false trades crash safety for speed (tests only). */
  durable: boolean;
  binDir?: string;
  /** Address it listens on (default 127.0.0.1). */
  host?: string;
  /** A network (CIDR) whose clients may connect without a password, besides loopback (a closed test network). */
  trustNetwork?: string;
}

/** Finds the PostgreSQL server binaries: PG_BIN_DIR, else the newest /usr/lib/postgresql/<v>/bin. */
export function findPostgresBinDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env.PG_BIN_DIR) return env.PG_BIN_DIR;
  const base = '/usr/lib/postgresql';
  const versions = existsSync(base)
    ? readdirSync(base)
        .filter((v) => existsSync(join(base, v, 'bin', 'initdb')))
        .sort((a, b) => Number(b) - Number(a))
    : [];
  if (versions.length === 0) {
    throw new Error('PostgreSQL server binaries not found (looked in /usr/lib/postgresql/*/bin); run `npm run setup` or set PG_BIN_DIR');
  }
  return join(base, versions[0]!, 'bin');
}

const isRoot = () => process.getuid?.() === 0;

function postgresIds(): { uid: number; gid: number } {
  const passwd = readFileSync('/etc/passwd', 'utf8').split('\n').find((l) => l.startsWith('postgres:'));
  if (!passwd) throw new Error('running as root needs the `postgres` system user (installed with the PostgreSQL packages)');
  const [, , uid, gid] = passwd.split(':');
  return { uid: Number(uid), gid: Number(gid) };
}

/** True when every ancestor of `dir` lets other users through (the postgres user must reach it). */
function traversableByOthers(dir: string): boolean {
  for (let d = dirname(resolve(dir)); ; d = dirname(d)) {
    if (existsSync(d) && (statSync(d).mode & 0o001) === 0) return false;
    if (d === dirname(d)) return true;
  }
}

/**
 * Where PostgreSQL keeps its files for a wanted data dir. As root, a data dir below a
 * private directory (e.g. /root, mode 700) cannot be reached by the postgres user, so the
 * files go to a stable place outside it instead, derived from the wanted path so that a
 * restart finds them again.
 */
export function placeDataDir(wanted: string): string {
  if (!isRoot() || traversableByOthers(wanted)) return resolve(wanted);
  const key = createHash('sha1').update(resolve(wanted)).digest('hex').slice(0, 12);
  return join('/var/lib/spate', `postgres-${key}`);
}

export class PostgresServer {
  readonly binDir: string;

  constructor(readonly options: PostgresServerOptions) {
    this.binDir = options.binDir ?? findPostgresBinDir();
  }

  get port(): number {
    return this.options.port;
  }

  url(database = 'postgres'): string {
    return `postgres://postgres@${this.options.host ?? '127.0.0.1'}:${this.options.port}/${database}`;
  }

  private async exec(tool: string, args: string[]): Promise<string> {
    const bin = join(this.binDir, tool);
    const [cmd, argv] = isRoot() ? ['runuser', ['-u', 'postgres', '--', bin, ...args]] : [bin, args];
    try {
      const { stdout } = await run(cmd, argv, { maxBuffer: 16 * 1024 * 1024 });
      return stdout;
    } catch (err) {
      const e = err as { stderr?: string; message: string };
      throw new Error(`${tool} failed: ${e.stderr?.trim() || e.message}`, { cause: err });
    }
  }

  /** Creates the cluster (initdb) unless it already exists. */
  async init(): Promise<void> {
    const dir = this.options.dataDir;
    if (existsSync(join(dir, 'PG_VERSION'))) return;
    mkdirSync(dirname(dir), { recursive: true, mode: 0o755 }); // parents must stay traversable
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    if (isRoot()) {
      const { uid, gid } = postgresIds();
      chownSync(dir, uid, gid);
    }
    await this.exec('initdb', ['-D', dir, '-A', 'trust', '-U', 'postgres', '-E', 'UTF8', '--no-instructions']);
    if (this.options.trustNetwork) {
      appendFileSync(join(dir, 'pg_hba.conf'), `host all all ${this.options.trustNetwork} trust\n`);
    }
  }

  private serverSettings(): string[][] {
    const settings = [
      ['-p', String(this.options.port)],
      ['-c', `listen_addresses=${this.options.host ?? '127.0.0.1'}`],
      ['-c', 'unix_socket_directories='],
      ['-c', 'max_connections=300'],
    ];
    if (!this.options.durable) settings.push(['-c', 'fsync=off'], ['-c', 'synchronous_commit=off'], ['-c', 'full_page_writes=off']);
    return settings;
  }

  /**
   * The postmaster as a foreground process, for a supervisor to run and restart: as root it
   * runs under the postgres user's uid/gid. SIGINT is a fast shutdown.
   */
  foregroundCommand(): { command: string; args: string[]; uid?: number; gid?: number } {
    const args = ['-D', this.options.dataDir, ...this.serverSettings().flat()];
    return { command: join(this.binDir, 'postgres'), args, ...(isRoot() ? postgresIds() : {}) };
  }

  /** Resolves once the server accepts queries. */
  async waitReady(): Promise<void> {
    await waitFor(`postgres on port ${this.options.port}`, async () => {
      const client = new pg.Client({ connectionString: this.url() });
      try {
        await client.connect();
        await client.query('select 1');
        return true;
      } finally {
        await client.end().catch(() => undefined);
      }
    }, 60_000);
  }

  async start(): Promise<void> {
    const opts = this.serverSettings().map(([flag, value]) => (value === 'unix_socket_directories=' ? `${flag} unix_socket_directories=''` : `${flag} ${value}`));
    await this.exec('pg_ctl', ['-D', this.options.dataDir, '-l', join(this.options.dataDir, 'server.log'), '-o', opts.join(' '), '-w', '-t', '60', 'start']);
    await this.waitReady();
  }

  /** Fast shutdown: rolls back open transactions, waits for exit. */
  async stop(): Promise<void> {
    if (!this.running) return;
    await this.exec('pg_ctl', ['-D', this.options.dataDir, '-m', 'fast', '-w', 'stop']);
  }

  async restart(): Promise<void> {
    await this.stop();
    await this.start();
  }

  get pid(): number | undefined {
    const file = join(this.options.dataDir, 'postmaster.pid');
    try {
      accessSync(file, constants.R_OK);
      const pid = Number(readFileSync(file, 'utf8').split('\n')[0]);
      return Number.isInteger(pid) && pid > 0 ? pid : undefined;
    } catch {
      return undefined;
    }
  }

  get running(): boolean {
    const pid = this.pid;
    if (pid === undefined) return false;
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  }

  async createDatabase(name: string): Promise<string> {
    const client = new pg.Client({ connectionString: this.url() });
    await client.connect();
    try {
      const exists = await client.query('select 1 from pg_database where datname = $1', [name]);
      if (exists.rowCount === 0) await client.query(`create database ${pg.escapeIdentifier(name)}`);
    } finally {
      await client.end();
    }
    return this.url(name);
  }
}

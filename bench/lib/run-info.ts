// What a result needs to be reproduced and compared: the machine, the commit (and whether the
// tree had changes), the versions of everything measured or measuring, and the exact command.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { cpus, loadavg, release, totalmem } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { findPostgresBinDir } from '../../deploy/local/postgres.js';

export interface RunInfo {
  date: string;
  cpu: string;
  cores: number;
  memoryGiB: number;
  kernel: string;
  /** 1-minute load average when the run started: the machine may be shared. */
  loadAverage: number;
  /** Short hash, with " (dirty)" when tracked files had changes (bench/results/ aside). */
  commit: string;
  versions: { node: string; natsServer: string; postgres: string; autocannon: string; uws: string };
  /** The command as typed, quoted so that it can be pasted. */
  command: string;
  argv: string[];
}

const require = createRequire(import.meta.url);
/** The repository root, from bench/lib/ in the sources or dist/bench/lib/ when built. */
const root = fileURLToPath(new URL(import.meta.url.includes('/dist/bench/') ? '../../../' : '../../', import.meta.url));

function run(command: string, args: string[]): string | undefined {
  try {
    return execFileSync(command, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'], timeout: 10_000 }).trim();
  } catch {
    return undefined; // reported as unknown
  }
}

function packageVersion(name: string): { name: string; version: string; dir: string } | undefined {
  try {
    const file = require.resolve(`${name}/package.json`);
    const pkg = JSON.parse(readFileSync(file, 'utf8')) as { name: string; version: string };
    return { ...pkg, dir: dirname(file) };
  } catch {
    return undefined;
  }
}

export function gitCommit(): string {
  const hash = run('git', ['-C', root, 'rev-parse', '--short', 'HEAD']);
  if (!hash) return 'unknown (not a git checkout)';
  // Results written by earlier runs are not changes to what is measured.
  const changes = run('git', ['-C', root, 'status', '--porcelain', '--untracked-files=no', '--', '.', ':(exclude)bench/results']);
  return changes ? `${hash} (dirty)` : hash;
}

function uwsBuild(): string {
  const pkg = packageVersion('uWebSockets.js');
  if (!pkg) return 'unknown';
  // The binary bench/lib/uws.ts loads for this Node ABI.
  const binary = `uws_${process.platform}_${process.arch}_${process.versions.modules}.node`;
  return `${pkg.name === 'uWebSockets.js' ? '' : `${pkg.name} `}${pkg.version} (${binary})`;
}

function postgresVersion(): string {
  try {
    return run(join(findPostgresBinDir(), 'postgres'), ['--version'])?.replace(/^postgres \(PostgreSQL\) /, '') ?? 'unknown';
  } catch {
    return 'not installed';
  }
}

const quote = (arg: string) => (/^[\w@%+=:,./-]+$/.test(arg) ? arg : `'${arg.replace(/'/g, `'\\''`)}'`);

/** `npm run bench -- …` when npm started us, else the node command line. */
export function commandLine(argv = process.argv, env = process.env): string {
  const args = argv.slice(2).map(quote);
  if (env.npm_lifecycle_event === 'bench') return ['npm run bench', ...(args.length ? ['--', ...args] : [])].join(' ');
  const script = argv[1] ? relative(process.cwd(), argv[1]) || argv[1] : '';
  return ['node', ...process.execArgv.map(quote), quote(script), ...args].join(' ');
}

export function runInfo(): RunInfo {
  return {
    date: new Date().toISOString(),
    cpu: cpus()[0]?.model ?? 'unknown',
    cores: cpus().length,
    memoryGiB: Math.round(totalmem() / 1024 ** 3),
    kernel: release(),
    loadAverage: Math.round(loadavg()[0]! * 100) / 100,
    commit: gitCommit(),
    versions: {
      node: process.version,
      natsServer: run(process.env.NATS_SERVER_BIN ?? 'nats-server', ['--version']) ?? 'unknown',
      postgres: postgresVersion(),
      autocannon: packageVersion('autocannon')?.version ?? 'unknown',
      uws: uwsBuild(),
    },
    command: commandLine(),
    argv: process.argv.slice(2),
  };
}

// Every command of the project answers `--help` with its usage and exit code 0, and a command
// given an option it does not know (or a value it cannot use) says so with its usage and exit
// code 2, never a stack trace. Run from source (as `npm run …` runs them once built).
import { execFile } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const root = resolve(import.meta.dirname, '..');

interface Ran {
  code: number;
  stdout: string;
  stderr: string;
}

function run(file: string, args: string[]): Promise<Ran> {
  return new Promise((done) => {
    // An empty environment of the project's own variables: a DATABASE_URL or NATS_URL set in the
    // shell must not change what --help does.
    const env = { PATH: process.env.PATH, HOME: process.env.HOME };
    execFile(process.execPath, ['--import', 'tsx', resolve(root, file), ...args], { cwd: root, env, timeout: 50_000 }, (err, stdout, stderr) => {
      done({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr });
    });
  });
}

const STACK_TRACE = /^\s+at .+:\d+:\d+\)?$/m;

const commands: [name: string, file: string, args: string[]][] = [
  ['spate', 'cli/spate.ts', []],
  ['spate import', 'cli/spate.ts', ['import']],
  ['spate admin', 'cli/spate.ts', ['admin']],
  ['spate admin bootstrap', 'cli/spate.ts', ['admin', 'bootstrap']],
  ['spate admin user', 'cli/spate.ts', ['admin', 'user']],
  ['spate admin key', 'cli/spate.ts', ['admin', 'key']],
  ['ingest node (node dist/ingest/main.js)', 'ingest/main.ts', []],
  ['admin server (node dist/admin/main.js)', 'admin/main.ts', []],
  ['worker (node dist/workers/main.js)', 'workers/main.ts', []],
  ['npm start', 'deploy/start.ts', []],
  ['npm run bench', 'bench/run.ts', []],
  ['bench/charts.ts', 'bench/charts.ts', []],
  ['bench/generate-events.ts', 'bench/generate-events.ts', []],
  ['bench/parse-inline.ts', 'bench/parse-inline.ts', []],
  ['bench/compare-ingest.ts', 'bench/compare-ingest.ts', []],
  ['bench/nats-dedup-memory.ts', 'bench/nats-dedup-memory.ts', []],
  ['bench/workers/throughput.ts', 'bench/workers/throughput.ts', []],
  ['bench/workers/batch-cpu.ts', 'bench/workers/batch-cpu.ts', []],
  ['bench/exports/throughput.ts', 'bench/exports/throughput.ts', []],
  ['bench/exports/parquet-writers.ts', 'bench/exports/parquet-writers.ts', []],
  ['bench/compare-pipeline.ts', 'bench/compare-pipeline.ts', []],
  ['bench/restarted-worker.ts', 'bench/restarted-worker.ts', []],
  ['bench/idle-cluster.ts', 'bench/idle-cluster.ts', []],
  ['bench/plugins/sandbox-cost.ts', 'bench/plugins/sandbox-cost.ts', []],
  ['bench/plugins/worker-cost.ts', 'bench/plugins/worker-cost.ts', []],
  ['bench/plugins/delivery.ts', 'bench/plugins/delivery.ts', []],
  ['bench/plugins/delivery-sink.ts', 'bench/plugins/delivery-sink.ts', []],
  ['bench/plugins/webhook-ceiling.ts', 'bench/plugins/webhook-ceiling.ts', []],
  ['bench/streams/write-rate.ts', 'bench/streams/write-rate.ts', []],
  ['bench/ceilings/trivial-uws.ts', 'bench/ceilings/trivial-uws.ts', []],
  ['bench/baseline/server.ts', 'bench/baseline/server.ts', []],
  ['the containers\' health check (node dist/deploy/docker/healthcheck.js)', 'deploy/docker/healthcheck.ts', []],
];

/** Every bench program: a file of bench/ (not bench/lib/, not a test) that reads its command line. */
function benchPrograms(dir = resolve(root, 'bench')): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return e.name === 'lib' || e.name === 'results' ? [] : benchPrograms(path);
    if (!e.name.endsWith('.ts') || e.name.endsWith('.test.ts')) return [];
    return /parseBenchArgs\(|parseArgs\(|process\.argv/.test(readFileSync(path, 'utf8')) ? [relative(root, path)] : [];
  });
}

describe.concurrent('--help', () => {
  it('help - the list holds every bench program', () => {
    const listed = new Set(commands.map(([, file]) => file));
    expect(benchPrograms().filter((f) => !listed.has(f))).toEqual([]);
  });

  it.each(commands)('help - %s --help prints its usage and exits 0', async (_name, file, args) => {
    const r = await run(file, [...args, '--help']);
    expect(r.stderr).not.toMatch(STACK_TRACE);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/usage|Configuration \(environment variables\)/i);
  });

  // The three servers take no options (they read their settings from the environment).
  it.each(commands.filter(([, file]) => !/^(ingest|admin|workers)\/main\.ts$/.test(file)))('help - %s refuses an unknown option with its usage and exit code 2', async (_name, file, args) => {
    const r = await run(file, [...args, '--no-such-option']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--no-such-option');
    expect(r.stderr).toMatch(/usage/i);
    expect(r.stderr).not.toMatch(STACK_TRACE);
  });

  it.each([
    ['--nats-nodes 2', '--nats-nodes must be 1 or 3'],
    ['--ingest 0', '--ingest must be a positive integer'],
    ['--workers many', '--workers must be 0 or more'],
  ])('help - npm start %s is refused with its usage and exit code 2, before starting anything', async (option, problem) => {
    const r = await run('deploy/start.ts', option.split(' '));
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(problem);
    expect(r.stderr).toContain('usage: npm start');
    expect(r.stderr).not.toMatch(STACK_TRACE);
  });

  it('help - npm run setup -- --help prints its usage and installs nothing; an unknown option is refused', async () => {
    const sh = (arg: string) =>
      new Promise<Ran>((done) => {
        execFile('bash', [resolve(root, 'scripts/setup.sh'), arg], { cwd: root, timeout: 20_000 }, (err, stdout, stderr) => {
          done({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr });
        });
      });
    const help = await sh('--help');
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/^usage: npm run setup\n/);
    expect(help.stdout).not.toContain('setup: ');
    const refused = await sh('--no-such-option');
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('unknown option: --no-such-option');
    expect(refused.stdout).toBe('');
  });
});

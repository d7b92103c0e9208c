// The processes a benchmark measures: each runs apart from the load generator, as in production.
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { runtimeModule, type NatsAuth } from '../../lib/index.js';
import { waitFor } from '../../deploy/local/wait.js';

export interface BenchProcess {
  child: ChildProcess;
  pid: number;
  /** SIGTERM, then SIGKILL after 15 s. */
  stop(): Promise<void>;
  /** SIGKILL: drops whatever work it still had. */
  kill(): Promise<void>;
}

/**
 * A temp dir for a bench program's clusters, removed when the process exits (also on Ctrl-C or a
 * crash, after the children were killed: their exit handler is registered first, below). Open to
 * others: run as root, PostgreSQL runs as the postgres user and must reach its data dir in here,
 * or the launcher puts it under /var/lib/spate, where nothing removes it after the run.
 */
export function scratchDir(name: string): string {
  const dir = mkdtempSync(join(tmpdir(), `spate-${name}-`));
  chmodSync(dir, 0o711);
  process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** Starts a Node program of ours (built JS when run from dist, TypeScript via tsx otherwise). */
export function startNodeProcess(fromUrl: string, relative: string, env: NodeJS.ProcessEnv, onLine?: (line: string) => void): BenchProcess {
  const entry = runtimeModule(fromUrl, relative);
  const child = spawn(process.execPath, [...entry.execArgv, entry.path], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'inherit'] });
  killOnExit(child);
  if (onLine) createInterface({ input: child.stdout }).on('line', onLine);
  else child.stdout.resume();
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  return {
    child,
    pid: child.pid!,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      const t = setTimeout(() => child.kill('SIGKILL'), 15_000);
      await exited;
      clearTimeout(t);
    },
    async kill() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
  };
}

/** Starts a server of ours that prints {"port"} on stdout when listening; resolves with its URL. */
async function startPortPrinter(name: string, relative: string, env: NodeJS.ProcessEnv): Promise<BenchProcess & { url: string }> {
  let port = 0;
  const p = startNodeProcess(import.meta.url, relative, env, (line) => {
    port = (JSON.parse(line) as { port: number }).port;
  });
  await waitFor(name, () => port > 0 || p.child.exitCode !== null, 30_000);
  if (port === 0) throw new Error(`${name} exited before listening`);
  return { ...p, url: `http://127.0.0.1:${port}` };
}

/** Starts the trivial uWS ceiling and resolves with its URL. */
export function startTrivialUws(): Promise<BenchProcess & { url: string }> {
  return startPortPrinter('trivial uWS server', '../ceilings/trivial-uws', {});
}

/** Starts the baseline capture server (bench/baseline, not part of the product). */
export function startBaseline(natsUrl: string, auth: NatsAuth): Promise<BenchProcess & { url: string }> {
  return startPortPrinter('baseline server', '../baseline/server', { NATS_URL: natsUrl, NATS_USER: auth.user ?? '', NATS_PASSWORD: auth.pass ?? '' });
}

/** Fields of /proc/<pid>/stat after the command name (which may hold spaces and parentheses). */
function statFields(pid: number | string): string[] {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
}

/** Two adjacent clock-tick fields of /proc/<pid>/stat (user, system) in seconds; 0 once the process has ended. */
function statSeconds(pid: number | string, userField: number): number {
  try {
    const fields = statFields(pid);
    return (Number(fields[userField]) + Number(fields[userField + 1])) / 100; // clock ticks, 100/s
  } catch {
    return 0; // ended: its time is no longer visible
  }
}

/** CPU seconds (user + system) these processes have used so far; one that has ended counts 0. */
export function cpuSeconds(...pids: (number | undefined)[]): number {
  let seconds = 0;
  for (const pid of pids) if (pid !== undefined) seconds += statSeconds(pid, 11); // utime, stime
  return seconds;
}

/** Seconds of CPU the whole machine spent busy, idle and idle waiting for disk I/O, all cores together (/proc/stat). */
export function machineCpuSeconds(): { busy: number; idle: number; iowait: number } {
  const fields = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0]!.trim().split(/\s+/).slice(1).map(Number);
  // user nice system idle iowait irq softirq steal (guest time is already in user)
  const [user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0] = fields;
  return { busy: (user + nice + system + irq + softirq + steal) / 100, idle: idle / 100, iowait: iowait / 100 };
}

/**
 * CPU seconds (user + system) of a process's main thread and of its other threads (libuv's pool,
 * where zlib compresses; V8's GC helpers; worker threads) so far; zeros once it has ended. The
 * process's own line counts every thread, ended ones too: the others are that less the main one.
 */
export function threadCpuSeconds(pid: number): { main: number; others: number } {
  const all = statSeconds(pid, 11);
  const main = statSeconds(`${pid}/task/${pid}`, 11);
  return { main, others: Math.max(0, all - main) };
}

/** CPU seconds of a process's children that have ended and been waited for (cutime + cstime). */
export function reapedChildrenCpuSeconds(pid: number | undefined): number {
  return pid === undefined ? 0 : statSeconds(pid, 13);
}

/** A process and its children (e.g. the postmaster and its backends). */
export function withChildren(pid: number | undefined): number[] {
  if (pid === undefined) return [];
  const out = [pid];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (Number(statFields(entry)[1]) === pid) out.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

/** Resident memory of a process in bytes. */
export function rssBytes(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) * 1024 : 0;
}

/** Samples a process's RSS until stopped; returns the peak. */
export function sampleRss(pid: number, everyMs = 100): { stop(): number } {
  let peak = rssBytes(pid);
  const timer = setInterval(() => {
    try {
      peak = Math.max(peak, rssBytes(pid));
    } catch {
      // process gone
    }
  }, everyMs);
  return {
    stop() {
      clearInterval(timer);
      return peak;
    },
  };
}

/** Children still running when the benchmark exits (also on Ctrl-C or an error) are killed. */
const running = new Set<ChildProcess>();
export function killOnExit(child: ChildProcess): void {
  running.add(child);
  child.once('exit', () => running.delete(child));
}
process.once('exit', () => {
  for (const child of running) child.kill('SIGKILL');
});
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => process.exit(130));
}

/** CPU seconds used so far by each role's processes (PostgreSQL with its backends and the ones it reaped). */
export function roleCpuSeconds(processes: readonly { role: string; pid: number }[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const { role, pid } of processes) {
    const seconds = role === 'postgres' ? postgresCpuSeconds(pid) : cpuSeconds(pid);
    out[role] = (out[role] ?? 0) + seconds;
  }
  return out;
}

/** PostgreSQL's CPU: the postmaster, its live backends, and those it has reaped (ended connections, autovacuum workers). */
export function postgresCpuSeconds(pid: number | undefined): number {
  return cpuSeconds(...withChildren(pid)) + reapedChildrenCpuSeconds(pid);
}

// A CPU budget per rig host. Machines of a real cluster each have their own cores; the rig's hosts
// share this machine's two. A cgroup CPU quota per host gives each NATS host a budget of its own
// for the write-rate measurement, so that what bounds one stream (its leader's CPU) shows instead
// of what bounds the shared machine. cgroup v1 (the cpu controller's own hierarchy) or v2.
import { existsSync, mkdirSync, readdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const V1_ROOT = '/sys/fs/cgroup/cpu';
const V2_ROOT = '/sys/fs/cgroup';
const PERIOD_US = 100_000;

type Flavour = { version: 1 | 2; root: string };

function flavour(): Flavour | undefined {
  if (existsSync(join(V1_ROOT, 'cpu.cfs_quota_us'))) return { version: 1, root: V1_ROOT };
  const controllers = join(V2_ROOT, 'cgroup.subtree_control');
  if (existsSync(controllers) && readFileSync(controllers, 'utf8').split(/\s+/).includes('cpu')) return { version: 2, root: V2_ROOT };
  return undefined;
}

/** Whether this machine lets the rig give hosts CPU budgets (and how it is done). */
export function cpuLimitSupport(): string | undefined {
  const f = flavour();
  return f && `cgroup v${f.version} CPU quota`;
}

/** The cgroup (relative to the cpu hierarchy's root) a process is in now. */
function cgroupOf(pid: number, f: Flavour): string {
  const lines = readFileSync(`/proc/${pid}/cgroup`, 'utf8').split('\n');
  const line = f.version === 1 ? lines.find((l) => l.split(':')[1]?.split(',').includes('cpu')) : lines.find((l) => l.startsWith('0::'));
  return line?.split(':')[2] ?? '/';
}

export class CpuLimit {
  private readonly f: Flavour;
  private readonly dir: string;
  private readonly moved = new Map<number, string>();

  /** A cgroup named `name` (e.g. spmh-<pid>-nats1) allowing `cores` of CPU time. */
  constructor(name: string, cores: number) {
    const f = flavour();
    if (!f) throw new Error('no cgroup cpu controller to give hosts CPU budgets');
    this.f = f;
    this.dir = join(f.root, name);
    mkdirSync(this.dir);
    const quota = Math.round(cores * PERIOD_US);
    if (f.version === 1) {
      writeFileSync(join(this.dir, 'cpu.cfs_period_us'), String(PERIOD_US));
      writeFileSync(join(this.dir, 'cpu.cfs_quota_us'), String(quota));
    } else {
      writeFileSync(join(this.dir, 'cpu.max'), `${quota} ${PERIOD_US}`);
    }
  }

  /** Moves processes (all their threads) into the budget. */
  add(pids: number[]): void {
    for (const pid of pids) {
      this.moved.set(pid, cgroupOf(pid, this.f));
      writeFileSync(join(this.dir, 'cgroup.procs'), String(pid));
    }
  }

  /** Puts the processes back where they were and removes the cgroup. */
  release(): void {
    for (const [pid, from] of this.moved) {
      try {
        writeFileSync(join(this.f.root, from, 'cgroup.procs'), String(pid));
      } catch {
        // exited meanwhile
      }
    }
    this.moved.clear();
    removeCgroup(this.dir, this.f);
  }
}

/** Empties a cgroup into its parent and removes it (a cgroup with processes cannot be removed). */
function removeCgroup(dir: string, f: Flavour): void {
  try {
    const pids = readFileSync(join(dir, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean);
    for (const pid of pids) writeFileSync(join(f.root, 'cgroup.procs'), pid);
    rmdirSync(dir);
  } catch {
    // gone already
  }
}

/** Removes the budgets named `<prefix>…` whose owner `isStale` says is gone. */
export function removeStaleCpuLimits(prefix: string, isStale: (name: string) => boolean): void {
  const f = flavour();
  if (!f) return;
  for (const name of readdirSync(f.root).filter((n) => n.startsWith(prefix) && isStale(n))) removeCgroup(join(f.root, name), f);
}

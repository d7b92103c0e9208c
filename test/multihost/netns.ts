// The rig's network: one Linux network namespace per host, all joined by a bridge that lives in a
// namespace of its own, with addresses in 198.18.0.0/15 (reserved for network testing) and no
// default route: the rig's traffic cannot leave it, and nothing here touches the machine's own
// interfaces, routes or firewall. A host may sit behind a "link" namespace instead of on the
// bridge, so that a userspace relay there carries every byte it sends or receives (relay.ts).
//
// Namespaces are named `spmh-<pid>-<host>` after the test process that made them. They are removed
// when it stops (exit, failure, SIGTERM/SIGINT), by a watchdog shell should it be killed with -9,
// and, at the next start, any `spmh-` namespace, mount or run directory whose process is gone.
import { execFile, execFileSync, spawn } from 'node:child_process';
import { readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { pidAlive } from '../faults/probes.js';
import { removeStaleCpuLimits } from './cpu-limit.js';

const run = promisify(execFile);

export const NS_PREFIX = 'spmh-';

/** A host attached to the bridge. */
export interface BridgedHost {
  name: string;
  address: string;
}

/** A host reached only through its link namespace, which holds its address on the bridge. */
export interface LinkedHost {
  name: string;
  /** The link namespace's name; it is on the bridge with `address`. */
  link: string;
  address: string;
  /** The point-to-point pair between the link (`linkInner`) and the host (`inner`), a /30. */
  linkInner: string;
  inner: string;
}

export interface NetworkSpec {
  bridged: BridgedHost[];
  linked: LinkedHost[];
}

function ipSync(args: string[]): string {
  return execFileSync('ip', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

function namespaces(): string[] {
  return ipSync(['netns', 'list'])
    .split('\n')
    .map((l) => l.split(' ')[0]!)
    .filter((n) => n.startsWith(NS_PREFIX));
}

/** The pid a rig namespace or run directory was made by (`spmh-<pid>-…`). */
function ownerOf(name: string): number {
  return Number(name.slice(NS_PREFIX.length).split('-')[0]);
}

/** Kills every process in a namespace, then removes it. */
function removeNamespace(ns: string): void {
  let pids: string[] = [];
  try {
    pids = ipSync(['netns', 'pids', ns]).split('\n').filter(Boolean);
  } catch {
    // already gone
  }
  for (const pid of pids) {
    try {
      process.kill(Number(pid), 'SIGKILL');
    } catch {
      // exited meanwhile
    }
  }
  try {
    ipSync(['netns', 'del', ns]);
  } catch {
    // already gone
  }
}

/** Mount points (tmpfs stores) under a rig run directory of `owner` (any owner when undefined). */
function rigMounts(owner?: number): string[] {
  return readFileSync('/proc/mounts', 'utf8')
    .split('\n')
    .map((l) => l.split(' ')[1] ?? '')
    .filter((m) => m.includes(`/${NS_PREFIX}`) && (owner === undefined || m.includes(`/${NS_PREFIX}${owner}-`)));
}

function unmount(path: string): void {
  try {
    execFileSync('umount', ['-l', path], { stdio: 'ignore' });
  } catch {
    // not mounted
  }
}

/** Where a rig run keeps its files: `/tmp/spmh-<pid>-XXXXXX` (rig.ts). */
export const RUN_DIRS = '/tmp';

/** Removes the namespaces, mounts and run directories of earlier rig runs whose test process is gone. */
export function removeStaleRigs(): string[] {
  const removed = namespaces().filter((ns) => !pidAlive(ownerOf(ns)));
  for (const ns of removed) removeNamespace(ns);
  for (const m of rigMounts()) {
    const owner = Number(/\/spmh-(\d+)-/.exec(m)?.[1]);
    if (!pidAlive(owner)) unmount(m);
  }
  removeStaleCpuLimits(NS_PREFIX, (name) => !pidAlive(ownerOf(name)));
  // Only `spmh-<pid>-` names are a run's: other tests' temp dirs (spmh-relay-test-…) are not.
  for (const d of readdirSync(RUN_DIRS).filter((name) => /^spmh-\d+-/.test(name) && !pidAlive(ownerOf(name)))) {
    rmSync(join(RUN_DIRS, d), { recursive: true, force: true });
  }
  return removed;
}

export class RigNetwork {
  private readonly names: string[] = [];
  private watchdog: number | undefined;
  private removed = false;

  private constructor(readonly spec: NetworkSpec) {}

  /** `spmh-<pid>-<host>`. */
  static nsName(host: string): string {
    return `${NS_PREFIX}${process.pid}-${host}`;
  }

  ns(host: string): string {
    return RigNetwork.nsName(host);
  }

  /** The address others reach `host` at. */
  address(host: string): string {
    const h = this.spec.bridged.find((b) => b.name === host) ?? this.spec.linked.find((l) => l.name === host);
    if (!h) throw new Error(`rig: no host ${host}`);
    return h.address;
  }

  static create(spec: NetworkSpec): RigNetwork {
    const net = new RigNetwork(spec);
    try {
      net.build();
    } catch (err) {
      net.remove();
      throw err;
    }
    return net;
  }

  private add(host: string): string {
    const ns = this.ns(host);
    ipSync(['netns', 'add', ns]);
    this.names.push(ns);
    ipSync(['-n', ns, 'link', 'set', 'lo', 'up']);
    return ns;
  }

  private build(): void {
    this.startWatchdog();
    const br = this.add('br');
    ipSync(['-n', br, 'link', 'add', 'br0', 'type', 'bridge']);
    ipSync(['-n', br, 'link', 'set', 'br0', 'up']);
    const onBridge = [...this.spec.bridged, ...this.spec.linked.map((l) => ({ name: l.link, address: l.address }))];
    for (const h of onBridge) {
      const ns = this.add(h.name);
      const veth = `v-${h.name}`.slice(0, 15);
      ipSync(['-n', br, 'link', 'add', veth, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', ns]);
      ipSync(['-n', br, 'link', 'set', veth, 'master', 'br0']);
      ipSync(['-n', br, 'link', 'set', veth, 'up']);
      ipSync(['-n', ns, 'addr', 'add', `${h.address}/24`, 'dev', 'eth0']);
      ipSync(['-n', ns, 'link', 'set', 'eth0', 'up']);
    }
    for (const l of this.spec.linked) {
      const inner = this.add(l.name);
      const link = this.ns(l.link);
      ipSync(['-n', link, 'link', 'add', 'in0', 'type', 'veth', 'peer', 'name', 'eth0', 'netns', inner]);
      ipSync(['-n', link, 'addr', 'add', `${l.linkInner}/30`, 'dev', 'in0']);
      ipSync(['-n', link, 'link', 'set', 'in0', 'up']);
      ipSync(['-n', inner, 'addr', 'add', `${l.inner}/30`, 'dev', 'eth0']);
      ipSync(['-n', inner, 'link', 'set', 'eth0', 'up']);
    }
  }

  /**
   * A shell outside this process's session that removes this run's namespaces and mounts once
   * the process is gone, however it went (kill -9 included). remove() ends it first.
   */
  private startWatchdog(): void {
    const prefix = `${NS_PREFIX}${process.pid}-`;
    const script = [
      `while kill -0 ${process.pid} 2>/dev/null; do sleep 1; done`,
      `for ns in $(ip netns list | cut -d' ' -f1 | grep '^${prefix}'); do`,
      `  for p in $(ip netns pids "$ns"); do kill -9 "$p"; done`,
      `  ip netns del "$ns"`,
      `done`,
      `for m in $(cut -d' ' -f2 /proc/mounts | grep '/${prefix}'); do umount -l "$m"; done`,
      `rm -rf ${RUN_DIRS}/${prefix}*`,
      `for d in /sys/fs/cgroup/cpu/${prefix}* /sys/fs/cgroup/${prefix}*; do if [ -d "$d" ]; then rmdir "$d"; fi; done`,
    ].join('\n');
    const child = spawn('sh', ['-c', script], { detached: true, stdio: 'ignore' });
    child.unref();
    this.watchdog = child.pid;
  }

  /** Runs a program in a host's namespace and returns its output. */
  async exec(host: string, command: string, args: string[], timeoutMs = 20_000): Promise<string> {
    try {
      const { stdout } = await run('ip', ['netns', 'exec', this.ns(host), command, ...args], { timeout: timeoutMs, maxBuffer: 16 * 1024 * 1024 });
      return stdout;
    } catch (err) {
      const e = err as { stderr?: string; message: string };
      throw new Error(`${host}: ${command} ${args.join(' ')} failed: ${e.stderr?.trim() || e.message}`, { cause: err });
    }
  }

  /** `command args` as run inside a host's namespace (ip execs it: the pid stays the program's). */
  wrap(host: string, command: string, args: string[]): { command: string; args: string[] } {
    return { command: 'ip', args: ['netns', 'exec', this.ns(host), command, ...args] };
  }

  async iptables(host: string, ...args: string[]): Promise<void> {
    await this.exec(host, 'iptables', ['-w', ...args]);
  }

  /** Cuts a host off the bridge: every packet in or out of its eth0 is dropped (loopback keeps working). */
  async isolate(host: string): Promise<void> {
    await this.iptables(host, '-A', 'INPUT', '-i', 'eth0', '-j', 'DROP');
    await this.iptables(host, '-A', 'OUTPUT', '-o', 'eth0', '-j', 'DROP');
  }

  /** Drops every packet between `host` and each of `peers` (both ways, filtered on `host`). */
  async block(host: string, peers: string[]): Promise<void> {
    for (const peer of peers) {
      const address = this.address(peer);
      await this.iptables(host, '-A', 'INPUT', '-s', address, '-j', 'DROP');
      await this.iptables(host, '-A', 'OUTPUT', '-d', address, '-j', 'DROP');
    }
  }

  /** Drops `percent`% of packets, at random, each way on a link namespace's inner side. */
  async lose(linkHost: string, percent: number): Promise<void> {
    const p = String(percent / 100);
    await this.iptables(linkHost, '-A', 'INPUT', '-i', 'in0', '-m', 'statistic', '--mode', 'random', '--probability', p, '-j', 'DROP');
    await this.iptables(linkHost, '-A', 'OUTPUT', '-o', 'in0', '-m', 'statistic', '--mode', 'random', '--probability', p, '-j', 'DROP');
  }

  /** Removes every filter rule of a host (heals isolate, block and lose). */
  async heal(host: string): Promise<void> {
    await this.iptables(host, '-F');
  }

  async linkDown(host: string): Promise<void> {
    await this.exec(host, 'ip', ['link', 'set', 'eth0', 'down']);
  }

  async linkUp(host: string): Promise<void> {
    await this.exec(host, 'ip', ['link', 'set', 'eth0', 'up']);
  }

  /** Pids of every process in a host's namespace. */
  pids(host: string): number[] {
    return ipSync(['netns', 'pids', this.ns(host)]).split('\n').filter(Boolean).map(Number);
  }

  /** Removes every namespace and mount of this run (synchronous: it also runs on process exit). */
  remove(mounts: string[] = []): void {
    if (this.removed) return;
    this.removed = true;
    for (const ns of this.names.reverse()) removeNamespace(ns);
    for (const m of [...mounts, ...rigMounts(process.pid)]) unmount(m);
    removeStaleCpuLimits(`${NS_PREFIX}${process.pid}-`, () => true);
    if (this.watchdog !== undefined) {
      try {
        process.kill(this.watchdog, 'SIGKILL');
      } catch {
        // ended
      }
    }
  }
}

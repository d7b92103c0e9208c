// Runs one child process of the local cluster, restarts it when it crashes (with backoff),
// shows its output prefixed with its name (JSON lines as they are, or readable: log-lines.ts), and stops it gracefully (SIGTERM, then SIGKILL). However the
// launcher dies (kill -9, OOM), its children end too: see exitWithLauncher.
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { exponentialBackoff, LIFELINE_FD_ENV } from '../../lib/index.js';
import { withParentDeathSignal } from '../local/parent-death.js';
import { lineFormatter, type LineFormatter } from './log-lines.js';

/**
 * How a child ends when the launcher dies without stopping it:
 * - 'lifeline': a Node deployable; it gets a pipe (the fd after any inherited ones, named by
 *   SPATE_LIFELINE_FD) whose end of file tells its start-up shell to stop (within 3 s). Node
 *   cannot set a parent-death signal itself.
 * - a signal: any other program; it runs under `setpriv --pdeathsig`, so the kernel sends it that
 *   signal when the launcher's process dies (SIGTERM for nats-server, SIGINT, the fast shutdown,
 *   for PostgreSQL). setpriv execs the program: its pid is the child's.
 */
export type LauncherDeath = 'lifeline' | NodeJS.Signals;

export interface ChildSpec {
  /** e.g. "ingest-1": shown before every line it prints. */
  name: string;
  command: string;
  args: string[];
  env: NodeJS.ProcessEnv;
  /** Grace period between the stop signal and SIGKILL when stopping. */
  stopTimeoutMs?: number;
  /** Signal for a graceful stop (SIGTERM unless the program wants another, e.g. SIGINT for PostgreSQL). */
  stopSignal?: NodeJS.Signals;
  /** Run as this user (the launcher runs PostgreSQL as `postgres` when started as root). */
  uid?: number;
  gid?: number;
  /** File descriptors of this process the child inherits as its fds 3, 4, … */
  inheritFds?: number[];
  /** How it ends when the launcher dies (none: it may outlive a launcher killed with -9). */
  exitWithLauncher?: LauncherDeath;
}

export interface SupervisorLog {
  info(message: string): void;
  warn(message: string): void;
}

export class SupervisedChild {
  private child: ChildProcess | undefined;
  private stopping = false;
  private restarts = 0;
  private restartTimer: NodeJS.Timeout | undefined;
  private exited: Promise<void> = Promise.resolve();
  private startedAt = 0;
  /** Called with the new pid after every (re)start. */
  onStart: (pid: number) => void = () => undefined;

  constructor(
    readonly spec: ChildSpec,
    private readonly log: SupervisorLog,
    /** How each line the child prints is shown (log-lines.ts): JSON as it came, or readable text. */
    private readonly formatLine: LineFormatter = lineFormatter('json'),
    /** Where the shown lines go (the launcher's stdout; a test rig keeps them in files). */
    private readonly write: (text: string) => void = (text) => void process.stdout.write(text),
  ) {}

  get pid(): number | undefined {
    return this.child?.pid;
  }

  get restartCount(): number {
    return this.restarts;
  }

  start(): void {
    this.stopping = false;
    const { name, env, uid, gid, exitWithLauncher, inheritFds = [] } = this.spec;
    const lifeline = exitWithLauncher === 'lifeline';
    const { command, args } =
      exitWithLauncher && !lifeline ? withParentDeathSignal(exitWithLauncher, this.spec.command, this.spec.args) : this.spec;
    // The lifeline follows the inherited fds (3, 4, …): its number is told in SPATE_LIFELINE_FD.
    const lifelineFd = 3 + inheritFds.length;
    // Its own process group: a terminal's Ctrl-C reaches only the launcher, which then stops
    // the children in order (rather than all at once, in no order).
    const child = spawn(command, args, {
      env: lifeline ? { ...env, [LIFELINE_FD_ENV]: String(lifelineFd) } : env,
      uid,
      gid,
      // The lifeline: a pipe whose other end only this process holds (never written to).
      stdio: ['ignore', 'pipe', 'pipe', ...inheritFds, ...(lifeline ? ['pipe' as const] : [])],
      detached: true,
    });
    if (lifeline) child.stdio[lifelineFd]?.on('error', () => undefined);
    this.child = child;
    this.startedAt = Date.now();
    for (const stream of [child.stdout!, child.stderr!]) {
      createInterface({ input: stream }).on('line', (line) => this.write(`${this.formatLine(name, line)}\n`));
    }
    this.exited = new Promise((resolve) => {
      child.once('exit', (code, signal) => {
        resolve();
        if (this.stopping) return;
        // A child that ran for a while restarts at once; one that keeps dying backs off to 10 s.
        const delay = Date.now() - this.startedAt > 30_000 ? 0 : exponentialBackoff(250, this.restarts, 10_000);
        this.restarts++;
        this.log.warn(`${name} exited (${signal ?? `code ${code}`}); restarting in ${delay} ms (restart #${this.restarts})`);
        this.restartTimer = setTimeout(() => this.start(), delay);
      });
    });
    child.once('error', (err) => this.log.warn(`${name} failed to start: ${err.message}`));
    if (child.pid !== undefined) this.onStart(child.pid);
  }

  /** From now on an exit is expected: it is not restarted. */
  markStopping(): void {
    this.stopping = true;
    clearTimeout(this.restartTimer);
  }

  async stop(): Promise<void> {
    this.markStopping();
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    child.kill(this.spec.stopSignal ?? 'SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), this.spec.stopTimeoutMs ?? 30_000);
    await this.exited;
    clearTimeout(timer);
  }
}

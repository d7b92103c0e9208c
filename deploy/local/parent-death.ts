// Programs that end when the process that started them dies, however it dies: the kernel's
// parent-death signal (prctl PR_SET_PDEATHSIG), set by util-linux's setpriv, which then execs the
// program (same pid). Node cannot set it for its own children; Node children get a lifeline pipe
// instead (lib/process-shell.ts).
import { execFileSync } from 'node:child_process';

let setprivAvailable: boolean | undefined;

/** Whether util-linux's setpriv (with --pdeathsig) is installed; checked once. */
export function hasSetpriv(): boolean {
  if (setprivAvailable === undefined) {
    try {
      execFileSync('setpriv', ['--pdeathsig', 'TERM', '--', 'true'], { stdio: 'ignore' });
      setprivAvailable = true;
    } catch {
      setprivAvailable = false;
    }
  }
  return setprivAvailable;
}

/**
 * `command args` as run so that the kernel sends it `signal` when this process dies: the signal goes
 * out when the thread that spawned it ends, which in Node is the main thread, i.e. the process.
 */
export function withParentDeathSignal(signal: NodeJS.Signals, command: string, args: string[]): { command: string; args: string[] } {
  if (!hasSetpriv()) return { command, args };
  return { command: 'setpriv', args: ['--pdeathsig', signal, '--', command, ...args] };
}


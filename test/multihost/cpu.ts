// CPU time of processes from /proc (user + system, all threads), to put the rig's per-event
// costs beside the capacity model's.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

let ticksPerSecond: number | undefined;

function clockTicks(): number {
  ticksPerSecond ??= Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  return ticksPerSecond;
}

/** Seconds of CPU a process has used so far (0 when it is gone). */
export function cpuSeconds(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name is in parentheses and may hold spaces: count fields after the last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    return (Number(fields[11]) + Number(fields[12])) / clockTicks();
  } catch {
    return 0;
  }
}

/** CPU seconds per group of pids, between start() and the call of the function it returns. */
export function cpuMeter(groups: () => Record<string, number[]>): () => Record<string, number> {
  const before = new Map<number, number>();
  for (const pids of Object.values(groups())) for (const pid of pids) before.set(pid, cpuSeconds(pid));
  return () => {
    const used: Record<string, number> = {};
    for (const [name, pids] of Object.entries(groups())) {
      used[name] = pids.reduce((sum, pid) => sum + Math.max(0, cpuSeconds(pid) - (before.get(pid) ?? 0)), 0);
    }
    return used;
  };
}

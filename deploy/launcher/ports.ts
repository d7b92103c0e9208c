// Ports of a local cluster are chosen once per data dir and kept in ports.json, so a second
// `npm start` on the same data dir comes back on the same addresses. A preferred port is used
// when free; otherwise any free port. A port chosen is claimed machine-wide until this launcher
// exits: two launchers starting at once (two data dirs, or two test files) would otherwise both
// find 8000 free and both pick it, before either child listens there.
import { existsSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../local/ports.js';

const claimed = new Set<string>();

function claimFile(port: number): string {
  return join(tmpdir(), `spate-launcher-port-${port}.pid`);
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Claims `port` for this process (a file holding its pid, created exclusively). A claim of a
 * process that is gone (killed with -9) is taken over. False when another live launcher holds it.
 */
function claimPort(port: number): boolean {
  const file = claimFile(port);
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      writeFileSync(file, String(process.pid), { flag: 'wx' });
      if (claimed.size === 0) process.once('exit', releasePorts);
      claimed.add(file);
      return true;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const holder = Number(readFileSync(file, 'utf8'));
      if (holder === process.pid) return true;
      if (Number.isInteger(holder) && holder > 0 && processAlive(holder)) return false;
      try {
        unlinkSync(file); // a stale claim
      } catch {
        // another launcher took it over first: try once more
      }
    }
  }
  return false;
}

/** Gives back this process's claims (at exit; also after a failed start, by the caller). */
export function releasePorts(): void {
  for (const file of claimed) {
    try {
      if (Number(readFileSync(file, 'utf8')) === process.pid) unlinkSync(file);
    } catch {
      // already gone
    }
  }
  claimed.clear();
}

/** True when nothing listens on the port (a plain bind fails even against SO_REUSEPORT listeners). */
export function portIsFree(port: number, host = '127.0.0.1'): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen({ port, host, exclusive: true }, () => server.close(() => resolve(true)));
  });
}

export async function allocatePorts(dataDir: string, preferred: Record<string, number>): Promise<Record<string, number>> {
  const file = join(dataDir, 'ports.json');
  const stored = existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as Record<string, number>) : {};
  const chosen: Record<string, number> = {};
  const taken = new Set<number>();
  for (const [name, want] of Object.entries(preferred)) {
    let port: number | undefined;
    for (const candidate of [stored[name], want]) {
      if (candidate !== undefined && !taken.has(candidate) && (await portIsFree(candidate)) && claimPort(candidate)) {
        port = candidate;
        break;
      }
    }
    while (port === undefined || taken.has(port) || !claimPort(port)) port = await freePort();
    chosen[name] = port;
    taken.add(port);
  }
  writeFileSync(file, JSON.stringify({ ...stored, ...chosen }, null, 2) + '\n');
  return chosen;
}

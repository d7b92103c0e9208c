// Ports of a local cluster are chosen once per data dir and kept in ports.json, so a second
// `npm start` on the same data dir comes back on the same addresses. A preferred port is used
// when free; otherwise any free port.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { freePort } from '../local/ports.js';

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
      if (candidate !== undefined && !taken.has(candidate) && (await portIsFree(candidate))) {
        port = candidate;
        break;
      }
    }
    while (port === undefined || taken.has(port)) port = await freePort();
    chosen[name] = port;
    taken.add(port);
  }
  writeFileSync(file, JSON.stringify({ ...stored, ...chosen }, null, 2) + '\n');
  return chosen;
}

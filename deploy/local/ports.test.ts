import { createServer, type Server } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { ephemeralRangeStart, freePort } from './ports.js';

const open: Server[] = [];

afterEach(async () => {
  await Promise.all(open.splice(0).map((s) => new Promise((r) => s.close(r))));
});

function listen(port: number): Promise<Server> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve(server));
  });
}

describe('freePort', () => {
  it('ports - gives ports below the ephemeral range, which outgoing connections cannot take, and a server can listen on each', async () => {
    const start = ephemeralRangeStart();
    const ports = new Set<number>();
    for (let i = 0; i < 20; i++) {
      const port = await freePort();
      expect(port).toBeGreaterThanOrEqual(10_000);
      expect(port).toBeLessThan(start);
      open.push(await listen(port));
      ports.add(port);
    }
    // Each port handed out while the earlier ones are listening is another one.
    expect(ports.size).toBe(20);
  });
});

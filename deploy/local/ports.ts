import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';

const LOWEST = 10_000;

/**
 * The first port of the range the kernel picks from for listen(0) and for the source ports of
 * outgoing connections (Linux; 32768 elsewhere, the usual start).
 */
export function ephemeralRangeStart(): number {
  try {
    const start = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    return Number.isInteger(start) && start > 0 ? start : 32_768;
  } catch {
    return 32_768;
  }
}

/** Listens on 127.0.0.1:port and closes again: the port bound (0 asks the kernel for one), or undefined when it is taken. */
function probe(port: number): Promise<number | undefined> {
  return new Promise((resolve) => {
    const server = createServer();
    server.unref();
    server.once('error', () => resolve(undefined));
    server.listen(port, '127.0.0.1', () => {
      const address = server.address();
      const bound = typeof address === 'object' && address ? address.port : undefined;
      server.close(() => resolve(bound));
    });
  });
}

/**
 * A TCP port that was free a moment ago on 127.0.0.1. Drawn at random below the ephemeral range:
 * a port from listen(0) lies inside it, where any outgoing connection may take it as its source
 * port before our server binds it (a test run saw nats-server fail with "address already in use").
 */
export async function freePort(): Promise<number> {
  const end = ephemeralRangeStart();
  if (end > LOWEST + 1_000) {
    for (let attempt = 0; attempt < 50; attempt++) {
      const port = await probe(LOWEST + Math.floor(Math.random() * (end - LOWEST)));
      if (port !== undefined) return port;
    }
  }
  const port = await probe(0);
  if (port === undefined) throw new Error('no free TCP port on 127.0.0.1');
  return port;
}

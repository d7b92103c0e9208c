// A TCP proxy a test controls, for network faults that a real server cannot be made to produce
// on cue: `hold()` keeps what the server sends from reaching clients, `cut()` drops every
// connection together with what was held (the server believes it was delivered), as a network
// cut or a server dropping a slow consumer does. New connections work normally afterwards.
import { createServer, connect, type Server, type Socket } from 'node:net';
import { registerNatsAlias } from './nats.js';

export interface TcpProxy extends AsyncDisposable {
  /** `nats://127.0.0.1:<port>`-style address of the proxy (scheme of the target kept). */
  url: string;
  /** From now on, bytes from the server are kept back instead of forwarded. */
  hold(): void;
  /** Closes every connection, discarding held bytes; new connections pass through again. */
  cut(): void;
  close(): Promise<void>;
}

export async function startTcpProxy(target: string): Promise<TcpProxy> {
  const { protocol, hostname, port } = new URL(target);
  const pairs = new Set<{ client: Socket; upstream: Socket }>();
  let holding = false;
  const server: Server = createServer((client) => {
    const upstream = connect(Number(port), hostname);
    const pair = { client, upstream };
    pairs.add(pair);
    client.pipe(upstream);
    upstream.on('data', (chunk: Buffer) => {
      if (!holding) client.write(chunk);
    });
    const end = () => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('close', end).on('error', end);
    upstream.on('close', end).on('error', end);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('proxy has no port');
  const close = async () => {
    for (const { client, upstream } of pairs) {
      client.destroy();
      upstream.destroy();
    }
    await new Promise<void>((resolve) => server.close(() => resolve()));
  };
  const url = `${protocol}//127.0.0.1:${address.port}`;
  // A proxy to a test nats-server takes its credentials (testNats(proxy.url)).
  registerNatsAlias(url, target);
  return {
    url,
    hold: () => {
      holding = true;
    },
    cut: () => {
      for (const { client, upstream } of pairs) {
        client.destroy();
        upstream.destroy();
      }
      pairs.clear();
      holding = false;
    },
    close,
    [Symbol.asyncDispose]: close,
  };
}

// A userspace TCP relay for the multi-host rig, used two ways:
//   - a host's link: every byte a NATS node sends or receives crosses it, and `shape()` delays it
//     (200 ± 50 ms) on the fly, as netem would, which this machine's kernel lacks;
//   - the gateway: the test process lives in the machine's own network namespace and reaches the
//     rig's addresses only through a Unix socket to a relay inside the rig (nothing is routed).
// Bytes keep their order in each direction (TCP does; a later chunk never overtakes an earlier one).
import { createConnection, createServer, type Server, type Socket } from 'node:net';

export type Endpoint = { host: string; port: number } | { path: string };

export interface RelayRoute {
  listen: Endpoint;
  /** Where accepted connections go; 'header': the first line the client sends names it (`host:port`). */
  target: Endpoint | 'header';
  /** A line sent to the target before the client's bytes (what a 'header' route reads). */
  header?: string;
}

/** Delay added to every chunk, each way: `delayMs` ± up to `jitterMs`, uniformly. */
export interface LinkShape {
  delayMs: number;
  jitterMs: number;
}

export const NO_DELAY: LinkShape = Object.freeze({ delayMs: 0, jitterMs: 0 });

export interface Relay {
  /** The bound address of each route (the port filled in when 0 was asked). */
  addresses: Endpoint[];
  shape(shape: LinkShape): void;
  close(): Promise<void>;
}

/** Bytes queued in one direction before the sending side is paused. */
const QUEUE_LIMIT_BYTES = 16 * 1024 * 1024;
const HEADER_LIMIT_BYTES = 512;

/**
 * When a chunk that arrives at `now` is delivered: its own delay, but never before the chunk ahead
 * of it (`previousDue`), so jitter stretches the gaps without reordering bytes.
 */
export function deliveryTime(now: number, shape: LinkShape, previousDue: number, random: () => number = Math.random): number {
  const jitter = shape.jitterMs === 0 ? 0 : (random() * 2 - 1) * shape.jitterMs;
  return Math.max(previousDue, now + Math.max(0, shape.delayMs + jitter));
}

/** Parses `host:port` (the gateway's header line). */
export function parseTarget(line: string): { host: string; port: number } {
  const m = /^([0-9a-zA-Z.-]+):(\d{1,5})$/.exec(line.trim());
  const port = Number(m?.[2]);
  if (!m || port < 1 || port > 65535) throw new Error(`relay: bad target line ${JSON.stringify(line)}`);
  return { host: m[1]!, port };
}

/** One direction of a connection: forwards chunks from `from` to `to` after the current delay. */
class DelayLine {
  private readonly queue: { due: number; chunk: Buffer }[] = [];
  private queuedBytes = 0;
  private lastDue = 0;
  private timer: NodeJS.Timeout | undefined;
  private ended = false;

  constructor(
    private readonly from: Socket,
    private readonly to: Socket,
    private readonly shape: () => LinkShape,
  ) {
    from.on('data', (chunk: Buffer) => this.push(chunk));
    from.on('end', () => {
      this.ended = true;
      this.flush();
    });
    to.on('drain', () => this.resumeIfRoom());
  }

  push(chunk: Buffer): void {
    const shape = this.shape();
    if (shape.delayMs === 0 && shape.jitterMs === 0 && this.queue.length === 0) {
      this.write(chunk);
      return;
    }
    const due = deliveryTime(Date.now(), shape, this.lastDue);
    this.lastDue = due;
    this.queue.push({ due, chunk });
    this.queuedBytes += chunk.length;
    if (this.queuedBytes > QUEUE_LIMIT_BYTES) this.from.pause();
    this.schedule();
  }

  private write(chunk: Buffer): void {
    if (this.to.destroyed) return;
    if (!this.to.write(chunk)) this.from.pause();
  }

  private schedule(): void {
    if (this.timer || this.queue.length === 0) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.flush();
    }, Math.max(0, this.queue[0]!.due - Date.now()));
  }

  private flush(): void {
    const now = Date.now();
    while (this.queue.length > 0 && this.queue[0]!.due <= now) {
      const { chunk } = this.queue.shift()!;
      this.queuedBytes -= chunk.length;
      this.write(chunk);
    }
    if (this.queue.length > 0) this.schedule();
    else if (this.ended && !this.to.destroyed) this.to.end();
    this.resumeIfRoom();
  }

  private resumeIfRoom(): void {
    if (this.queuedBytes <= QUEUE_LIMIT_BYTES && this.to.writableLength < QUEUE_LIMIT_BYTES && this.from.isPaused()) this.from.resume();
  }

  stop(): void {
    clearTimeout(this.timer);
    this.queue.length = 0;
  }
}

function connectTo(target: Endpoint): Socket {
  return 'path' in target ? createConnection(target.path) : createConnection(target.port, target.host);
}

/** Reads the first line of `client` (the header naming the target) and returns it with what followed. */
function readHeader(client: Socket): Promise<{ line: string; rest: Buffer }> {
  return new Promise((resolve, reject) => {
    let buffered = Buffer.alloc(0);
    const onData = (chunk: Buffer) => {
      buffered = Buffer.concat([buffered, chunk]);
      const newline = buffered.indexOf(0x0a);
      if (newline === -1 && buffered.length < HEADER_LIMIT_BYTES) return;
      client.off('data', onData);
      client.pause();
      if (newline === -1) reject(new Error('relay: no header line'));
      else resolve({ line: buffered.subarray(0, newline).toString('latin1'), rest: buffered.subarray(newline + 1) });
    };
    client.on('data', onData);
    client.once('error', reject);
  });
}

export async function startRelay(routes: readonly RelayRoute[]): Promise<Relay> {
  let shape: LinkShape = NO_DELAY;
  const live = new Set<{ client: Socket; upstream: Socket | undefined }>();
  const servers: Server[] = [];

  const serve = (route: RelayRoute) => async (client: Socket) => {
    const pair: { client: Socket; upstream: Socket | undefined } = { client, upstream: undefined };
    live.add(pair);
    const lines: DelayLine[] = [];
    const end = () => {
      live.delete(pair);
      for (const l of lines) l.stop();
      client.destroy();
      pair.upstream?.destroy();
    };
    client.on('error', end).on('close', end);
    client.setNoDelay(true);
    try {
      let target: Endpoint;
      let rest: Buffer = Buffer.alloc(0);
      if (route.target === 'header') {
        const header = await readHeader(client);
        target = parseTarget(header.line);
        rest = header.rest;
      } else {
        target = route.target;
      }
      if (client.destroyed) return;
      const upstream = connectTo(target);
      pair.upstream = upstream;
      upstream.on('error', end).on('close', end);
      upstream.setNoDelay?.(true);
      if (route.header !== undefined) upstream.write(`${route.header}\n`);
      const current = () => shape;
      lines.push(new DelayLine(client, upstream, current), new DelayLine(upstream, client, current));
      if (rest.length > 0) lines[0]!.push(rest);
      client.resume();
    } catch {
      end();
    }
  };

  const addresses: Endpoint[] = [];
  try {
    for (const route of routes) {
      const server = createServer((c) => void serve(route)(c));
      servers.push(server);
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        if ('path' in route.listen) server.listen(route.listen.path, resolve);
        else server.listen(route.listen.port, route.listen.host, resolve);
      });
      const bound = server.address();
      addresses.push(typeof bound === 'string' || bound === null ? route.listen : { host: bound.address, port: bound.port });
    }
  } catch (err) {
    for (const s of servers) s.close();
    throw err;
  }

  return {
    addresses,
    shape: (next) => {
      shape = Object.freeze({ ...next });
    },
    close: async () => {
      for (const { client, upstream } of live) {
        client.destroy();
        upstream?.destroy();
      }
      live.clear();
      await Promise.all(servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
    },
  };
}

// The rig's userspace relay on its own (loopback, no namespaces): bytes pass intact and in order,
// a shape delays each direction by delay ± jitter and can change on live connections, and a
// 'header' route lets a client name its target (the rig's gateway).
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { deliveryTime, parseTarget, startRelay, type Relay } from './relay.js';

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function listen(onConnection: (s: Socket) => void): Promise<{ server: Server; port: number }> {
  const server = createServer(onConnection);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { server, port: (server.address() as { port: number }).port };
}

async function relayTo(port: number): Promise<{ relay: Relay; port: number }> {
  const relay = await startRelay([{ listen: { host: '127.0.0.1', port: 0 }, target: { host: '127.0.0.1', port } }]);
  cleanups.push(() => relay.close());
  return { relay, port: (relay.addresses[0] as { port: number }).port };
}

function connect(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const s = createConnection(port, '127.0.0.1', () => resolve(s));
    s.once('error', reject);
    cleanups.push(() => void s.destroy());
  });
}

/** Sends `lines` one every `gapMs` and returns each one's one-way time and the order they arrived in. */
async function oneWay(port: number, serverArrivals: { line: string; at: number }[], lines: number, gapMs: number): Promise<{ ms: number[]; order: string[] }> {
  const client = await connect(port);
  const sentAt = new Map<string, number>();
  for (let i = 0; i < lines; i++) {
    const line = `m${i}`;
    sentAt.set(line, Date.now());
    client.write(`${line}\n`);
    await new Promise((r) => setTimeout(r, gapMs));
  }
  const deadline = Date.now() + 10_000;
  while (serverArrivals.length < lines && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  return { ms: serverArrivals.map((a) => a.at - sentAt.get(a.line)!), order: serverArrivals.map((a) => a.line) };
}

function recordLines(into: { line: string; at: number }[]) {
  return (s: Socket) => {
    let buffered = '';
    s.on('data', (d: Buffer) => {
      buffered += d.toString();
      let nl: number;
      while ((nl = buffered.indexOf('\n')) !== -1) {
        into.push({ line: buffered.slice(0, nl), at: Date.now() });
        buffered = buffered.slice(nl + 1);
      }
    });
  };
}

describe('multihost relay', () => {
  it('relay - a chunk is due after its delay ± jitter, and never before the chunk ahead of it', () => {
    const shape = { delayMs: 200, jitterMs: 50 };
    expect(deliveryTime(1_000, shape, 0, () => 0)).toBe(1_150);
    expect(deliveryTime(1_000, shape, 0, () => 0.5)).toBe(1_200);
    expect(deliveryTime(1_000, shape, 0, () => 1)).toBe(1_250);
    expect(deliveryTime(1_000, shape, 1_240, () => 0)).toBe(1_240); // behind a slower earlier chunk
    expect(deliveryTime(1_000, { delayMs: 0, jitterMs: 0 }, 0)).toBe(1_000);
    let due = 0;
    for (let t = 0; t < 2_000; t += 3) {
      const next = deliveryTime(t, shape, due);
      expect(next).toBeGreaterThanOrEqual(Math.max(due, t + 150));
      expect(next).toBeLessThanOrEqual(Math.max(due, t + 250));
      due = next;
    }
    expect(parseTarget('198.18.0.20:8000\n')).toEqual({ host: '198.18.0.20', port: 8000 });
    expect(() => parseTarget('nowhere')).toThrow(/bad target/);
  });

  it('relay - 8 MiB each way arrive intact, with and without a delay', async () => {
    const { port: echo } = await listen((s) => s.pipe(s));
    const { relay, port } = await relayTo(echo);
    for (const shape of [{ delayMs: 0, jitterMs: 0 }, { delayMs: 5, jitterMs: 5 }]) {
      relay.shape(shape);
      const payload = randomBytes(8 * 1024 * 1024);
      const client = await connect(port);
      const received: Buffer[] = [];
      let n = 0;
      const done = new Promise<void>((resolve) =>
        client.on('data', (d: Buffer) => {
          received.push(d);
          n += d.length;
          if (n >= payload.length) resolve();
        }),
      );
      client.write(payload);
      await done;
      expect(Buffer.concat(received).equals(payload), JSON.stringify(shape)).toBe(true);
      client.destroy();
    }
  });

  it('relay - a shape of 200 ± 50 ms delays each chunk 150-250 ms in order, on a live connection, until lifted', async () => {
    const arrivals: { line: string; at: number }[] = [];
    const { port: sink } = await listen(recordLines(arrivals));
    const { relay, port } = await relayTo(sink);
    relay.shape({ delayMs: 200, jitterMs: 50 });
    const delayed = await oneWay(port, arrivals, 20, 15);
    expect(delayed.order).toEqual(Array.from({ length: 20 }, (_, i) => `m${i}`));
    // Timers never fire early; a loaded machine may fire them late, hence the wide top.
    for (const ms of delayed.ms) expect(ms).toBeGreaterThanOrEqual(149);
    for (const ms of delayed.ms) expect(ms).toBeLessThan(250 + 400);
    expect(Math.max(...delayed.ms) - Math.min(...delayed.ms)).toBeGreaterThan(10); // the jitter shows
    arrivals.length = 0;
    relay.shape({ delayMs: 0, jitterMs: 0 });
    const lifted = await oneWay(port, arrivals, 10, 5);
    expect(Math.max(...lifted.ms)).toBeLessThan(120);
  });

  it('relay - a gateway: TCP on one side, a Unix socket across, the target named by a header line', async () => {
    const { port: echo } = await listen((s) => s.pipe(s));
    const dir = mkdtempSync(join(tmpdir(), 'spmh-relay-test-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const inside = await startRelay([{ listen: { path: join(dir, 'gw.sock') }, target: 'header' }]);
    cleanups.push(() => inside.close());
    const outside = await startRelay([{ listen: { host: '127.0.0.1', port: 0 }, target: { path: join(dir, 'gw.sock') }, header: `127.0.0.1:${echo}` }]);
    cleanups.push(() => outside.close());
    const client = await connect((outside.addresses[0] as { port: number }).port);
    const reply = new Promise<string>((resolve) => client.once('data', (d: Buffer) => resolve(d.toString())));
    client.write('hello through the gateway');
    expect(await reply).toBe('hello through the gateway');
  });
});

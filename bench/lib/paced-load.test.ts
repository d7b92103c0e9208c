import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runLoad } from './load.js';
import { runPaced } from './paced-load.js';

let server: Server;
let url: string;
const arrivals: number[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    arrivals.push(performance.now());
    req.resume();
    req.on('end', () => {
      // What the ingest node answers when its in-flight budget is full, and when a publish failed.
      if (req.url === '/busy') res.writeHead(503, { 'Retry-After': '1' }).end('{"type":"server_error","code":"overloaded","detail":"x","attr":null}');
      else if (req.url === '/unavailable') res.writeHead(503, { 'Retry-After': '1' }).end('{"type":"server_error","code":"unavailable","detail":"x","attr":null}');
      else if (req.url === '/broken') res.writeHead(500).end('{}');
      else res.writeHead(200, { 'content-type': 'application/json' }).end('{"status":1}');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

describe('bench paced load', () => {
  it('paced load - sends each request when it is due, so an idle server shows its own latency', async () => {
    // 20 requests/s: a generator that sent each request one interval late would add 50 ms.
    const r = await runPaced({ url, path: '/', body: '{}', ratePerSec: 20, durationS: 0.5, connections: 4 });
    expect(r.sent).toBe(10);
    expect(r.ok).toBe(10);
    expect(r.p50).toBeLessThan(25);
    expect(r.sendLagP50).toBeLessThan(25);
  });

  it('paced load - spreads requests evenly over the second instead of sending its quota in a burst', async () => {
    arrivals.length = 0;
    const started = performance.now();
    const r = await runPaced({ url, path: '/', body: '{}', ratePerSec: 400, durationS: 0.5, connections: 8 });
    expect(r.sent).toBe(200);
    // Even: about 20 per 50 ms; a per-second burst would land all 200 in the first window.
    let most = 0;
    for (const at of arrivals) most = Math.max(most, arrivals.filter((x) => x >= at && x < at + 50).length);
    expect(most).toBeLessThan(80);
    expect(Math.max(...arrivals) - started).toBeGreaterThan(400);
  });

  it('paced load - counts 503 overloaded as busy, apart from errors (any other 503 too), and keeps both out of the latency', async () => {
    const busy = await runPaced({ url, path: '/busy', body: '{}', ratePerSec: 50, durationS: 0.2, connections: 2 });
    expect(busy).toMatchObject({ sent: 10, ok: 0, busy: 10, errors: 0 });
    expect(busy.p50).toBeNaN();
    const broken = await runPaced({ url, path: '/broken', body: '{}', ratePerSec: 50, durationS: 0.2, connections: 2 });
    expect(broken).toMatchObject({ sent: 10, ok: 0, busy: 0, errors: 10 });
    const unavailable = await runPaced({ url, path: '/unavailable', body: '{}', ratePerSec: 50, durationS: 0.2, connections: 2 });
    expect(unavailable).toMatchObject({ sent: 10, ok: 0, busy: 0, errors: 10 });
  });

  it('paced load - a warm-up is sent at the same rate but not counted', async () => {
    arrivals.length = 0;
    const r = await runPaced({ url, path: '/', body: '{}', ratePerSec: 50, durationS: 0.2, warmupS: 0.2, connections: 2 });
    expect(r.sent).toBe(10);
    expect(arrivals).toHaveLength(20);
  });

  it('load - throughput counts only 2xx; 503 overloaded is busy, other statuses are errors', async () => {
    const busy = await runLoad({ url: `${url}/busy`, body: '{}', eventsPerRequest: 1, connections: 2, durationS: 1 });
    expect(busy.ok).toBe(0);
    expect(busy.reqPerSec).toBe(0);
    expect(busy.busy).toBeGreaterThan(0);
    expect(busy.errors).toBe(0);
    const broken = await runLoad({ url: `${url}/broken`, body: '{}', eventsPerRequest: 1, connections: 2, durationS: 1 });
    expect(broken.eventsPerSec).toBe(0);
    expect(broken.busy).toBe(0);
    expect(broken.errors).toBeGreaterThan(0);
    const fine = await runLoad({ url, body: '{}', eventsPerRequest: 10, connections: 2, durationS: 1 });
    expect(fine.ok).toBeGreaterThan(0);
    expect(fine.eventsPerSec).toBeCloseTo(fine.reqPerSec * 10, 6);
    expect(fine.p50).toBeGreaterThan(0);
    expect(fine.busy + fine.errors).toBe(0);
  });
});

import { createServer, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backoffMs, postBatch } from './sender.js';

let server: Server;
let url: string;
const answers: { status: number; body: string; headers?: Record<string, string> }[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const a = answers.shift() ?? { status: 200, body: '{"status":1}' };
      res.writeHead(a.status, { 'content-type': 'application/json', ...a.headers });
      res.end(a.body);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/batch/`;
});
afterAll(() => new Promise<void>((r) => server.close(() => r())));

const send = () => postBatch(url, Buffer.from('{}'), { timeoutMs: 5_000, gzip: false, signal: new AbortController().signal });

describe('import sender', () => {
  it('import sender - classifies answers: 2xx ok; 503/429/5xx/408 retry (with Retry-After); 400/413/422 rejected; other 4xx fatal', async () => {
    answers.push(
      { status: 200, body: '{"status":1}' },
      { status: 503, body: '{"type":"server_error","code":"overloaded","detail":"at capacity"}', headers: { 'retry-after': '2' } },
      { status: 429, body: 'slow down' },
      { status: 502, body: '' },
      { status: 408, body: '' },
      { status: 413, body: '{"code":"event_too_large","detail":"an event is 2000000 bytes"}' },
      { status: 400, body: '{"code":"invalid_event","detail":"bad"}' },
      { status: 401, body: '{"code":"unknown_api_key","detail":"Project API key invalid."}' },
      { status: 404, body: '{"code":"not_found"}' },
    );
    expect(await send()).toEqual({ kind: 'ok' });
    expect(await send()).toEqual({ kind: 'retry', reason: '503 overloaded: at capacity', retryAfterMs: 2000 });
    expect(await send()).toEqual({ kind: 'retry', reason: '429: slow down', retryAfterMs: undefined });
    expect(await send()).toMatchObject({ kind: 'retry', reason: 'HTTP 502' });
    expect(await send()).toMatchObject({ kind: 'retry' });
    expect(await send()).toEqual({ kind: 'rejected', reason: '413 event_too_large: an event is 2000000 bytes' });
    expect(await send()).toEqual({ kind: 'rejected', reason: '400 invalid_event: bad' });
    expect(await send()).toEqual({ kind: 'fatal', reason: '401 unknown_api_key: Project API key invalid.' });
    expect(await send()).toEqual({ kind: 'fatal', reason: '404 not_found' });
  });

  it('import sender - a refused connection is a network error to retry', async () => {
    const closed = createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((r) => closed.close(() => r()));
    const outcome = await postBatch(`http://127.0.0.1:${port}/batch/`, Buffer.from('{}'), { timeoutMs: 5_000, gzip: false, signal: new AbortController().signal });
    expect(outcome).toMatchObject({ kind: 'retry', reason: 'network: ECONNREFUSED' });
  });

  it('import sender - the timeout limits the whole exchange: no answer, or an answer trickling in, is a timeout to retry', async () => {
    const sockets = new Set<Socket>();
    const slow = createServer((req, res) => {
      req.resume();
      if (req.url === '/trickle') {
        res.writeHead(200, { 'content-type': 'application/json' });
        const timer = setInterval(() => res.write(' '), 50);
        res.on('close', () => clearInterval(timer));
      } // else: never answer
    });
    slow.on('connection', (s) => sockets.add(s));
    await new Promise<void>((r) => slow.listen(0, '127.0.0.1', r));
    const base = `http://127.0.0.1:${(slow.address() as AddressInfo).port}`;
    try {
      for (const path of ['/silent', '/trickle']) {
        const started = performance.now();
        const outcome = await postBatch(`${base}${path}`, Buffer.from('{}'), { timeoutMs: 400, gzip: false, signal: new AbortController().signal });
        expect(outcome).toEqual({ kind: 'retry', reason: 'network: no answer within 0.4s', retryAfterMs: undefined });
        expect(performance.now() - started).toBeLessThan(2_000);
      }
    } finally {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => slow.close(() => r()));
    }
  });

  it('import sender - backoff doubles from 250 ms to a 30 s cap, with jitter, never below Retry-After', () => {
    expect(backoffMs(1, undefined, () => 1)).toBe(250);
    expect(backoffMs(1, undefined, () => 0)).toBe(125);
    expect(backoffMs(3, undefined, () => 1)).toBe(1000);
    expect(backoffMs(20, undefined, () => 1)).toBe(30_000);
    expect(backoffMs(1, 5000, () => 1)).toBe(5000);
  });
});

// The container health check (deploy/docker/healthcheck.ts) run as compose and the bootstrap Job
// run it: a separate Node process against a real HTTP server.
import { execFile } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runtimeModule } from '../../lib/index.js';
import { freePort } from '../../test/kit/index.js';

let server: Server;
let base: string;
let readyAfter = 0;

beforeAll(async () => {
  server = createServer((req, res) => {
    if (req.url === '/ok') res.writeHead(200).end('{"status":"ok"}');
    else if (req.url === '/later') res.writeHead(Date.now() >= readyAfter ? 200 : 503).end();
    // Answers 200, too late: a health check that waited for it would pass.
    else if (req.url === '/slow') setTimeout(() => res.writeHead(200).end(), 30_000).unref();
    else res.writeHead(503).end('{"ready":false}');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => {
  server.closeAllConnections();
  server.close();
});

function healthcheck(...args: string[]): Promise<{ code: number; stderr: string; ms: number }> {
  const entry = runtimeModule(import.meta.url, './healthcheck');
  const started = Date.now();
  return new Promise((resolve) => {
    execFile(process.execPath, [...entry.execArgv, entry.path, ...args], (err, _stdout, stderr) => {
      const code = err ? (typeof err.code === 'number' ? err.code : -1) : 0;
      resolve({ code, stderr, ms: Date.now() - started });
    });
  });
}

describe('container health check', () => {
  it('healthcheck - exits 0 when the URL answers 2xx', async () => {
    expect((await healthcheck(`${base}/ok`)).code).toBe(0);
  });

  it('healthcheck - exits 1 on a non-2xx answer, naming the status', async () => {
    const r = await healthcheck(`${base}/_ready`);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('HTTP 503');
  });

  it('healthcheck - exits 1 when nothing listens, and when the answer takes longer than 2 s', async () => {
    expect((await healthcheck(`http://127.0.0.1:${await freePort()}/_health`)).code).toBe(1);
    const slow = await healthcheck(`${base}/slow`);
    expect(slow.code).toBe(1);
    expect(slow.stderr).toMatch(/aborted|timeout/i);
    // 2 s and a Node start (seconds on a loaded host), far from the 30 s the answer takes.
    expect(slow.ms).toBeLessThan(15_000);
  });

  it('healthcheck - with --wait, retries until the URL answers 2xx', async () => {
    readyAfter = Date.now() + 2_000;
    const r = await healthcheck('--wait', '30', `${base}/later`);
    expect(r.code).toBe(0);
    expect(r.ms).toBeGreaterThanOrEqual(1_500);
  });

  it('healthcheck - bad usage exits 2', async () => {
    expect((await healthcheck()).code).toBe(2);
    expect((await healthcheck('--wait', 'soon', `${base}/ok`)).code).toBe(2);
    expect((await healthcheck(`${base}/ok`, 'extra')).code).toBe(2);
  });
});

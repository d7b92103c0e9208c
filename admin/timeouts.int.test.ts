// Slow clients cannot hold the admin server's sockets: headers and whole requests have deadlines
// (ADMIN_HEADERS_TIMEOUT, ADMIN_REQUEST_TIMEOUT), past which the answer is 408 and the connection
// closes, while other clients keep being served.
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAdminFixture, type AdminFixture, type TestUser } from '../test/admin/harness.js';

let f: AdminFixture;
let owner: TestUser;

beforeAll(async () => {
  f = await startAdminFixture({ ADMIN_HEADERS_TIMEOUT: '1s', ADMIN_REQUEST_TIMEOUT: '2s' });
  owner = await f.newUser('owner@timeouts.example');
});
afterAll(async () => f?.stop());

interface RawExchange {
  socket: Socket;
  /** Resolves when the server closes the connection: what it sent, and after how many ms. */
  closed: Promise<{ response: string; afterMs: number }>;
}

async function open(): Promise<RawExchange> {
  const socket = connect(f.admin.port, '127.0.0.1');
  await new Promise((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  const started = Date.now();
  let response = '';
  socket.on('data', (d: Buffer) => (response += d.toString()));
  const closed = new Promise<{ response: string; afterMs: number }>((resolve) => socket.once('close', () => resolve({ response, afterMs: Date.now() - started })));
  socket.on('error', () => undefined);
  return { socket, closed };
}

describe('admin timeouts', () => {
  it('timeouts - a body that stops arriving is answered 408 at ADMIN_REQUEST_TIMEOUT; others are served meanwhile', async () => {
    const stalled = await open();
    stalled.socket.write('POST /api/organizations/ HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"na');
    const during = Date.now();
    const res = await f.api('GET', '/api/organizations/', { key: owner.key });
    expect(res.status).toBe(200);
    expect(Date.now() - during).toBeLessThan(1_000);
    const { response, afterMs } = await stalled.closed;
    expect(response).toMatch(/^HTTP\/1\.1 408 /);
    expect(afterMs).toBeGreaterThanOrEqual(1_900);
    expect(afterMs).toBeLessThan(5_000);
  });

  it('timeouts - a body dribbled a byte at a time still has to finish within ADMIN_REQUEST_TIMEOUT', async () => {
    const slow = await open();
    slow.socket.write('POST /api/organizations/ HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n');
    const drip = setInterval(() => slow.socket.write(' '), 100);
    try {
      const { response, afterMs } = await slow.closed;
      expect(response).toMatch(/^HTTP\/1\.1 408 /);
      expect(afterMs).toBeGreaterThanOrEqual(1_900);
      expect(afterMs).toBeLessThan(5_000);
    } finally {
      clearInterval(drip);
    }
  });

  it('timeouts - headers that stop arriving are answered 408 at ADMIN_HEADERS_TIMEOUT', async () => {
    const stalled = await open();
    stalled.socket.write('GET /api/organizations/ HTTP/1.1\r\nHost: x\r\n');
    const { response, afterMs } = await stalled.closed;
    expect(response).toMatch(/^HTTP\/1\.1 408 /);
    expect(afterMs).toBeGreaterThanOrEqual(900);
    expect(afterMs).toBeLessThan(1_900);
  });
});

// SIGTERM: stop accepting, finish requests in flight (their events stored, their answers 200),
// flush, drain NATS, exit 0.
import { spawn } from 'node:child_process';
import { connect } from 'node:net';
import { Kvm } from '@nats-io/kv';
import { jetstreamManager } from '@nats-io/jetstream';
import { describe, expect, it } from 'vitest';
import { PROJECTS_BUCKET, runtimeModule, STREAMS } from '../lib/index.js';
import { freePort, startNats, waitFor } from '../test/kit/index.js';

describe('ingest shutdown', () => {
  it('shutdown - SIGTERM finishes the request in flight with a 200, refuses new connections, and exits 0', async () => {
    await using nats = await startNats();
    const nc = await nats.connect('shutdown-test');
    await (await new Kvm(nc).create(PROJECTS_BUCKET)).put('phc_shutdown', JSON.stringify({ projectId: 1, organizationId: 'o' }));
    const port = await freePort();
    const entry = runtimeModule(import.meta.url, './main');
    const child = spawn(process.execPath, [...entry.execArgv, entry.path], {
      env: { ...process.env, ...nats.env('ingest'), CAPTURE_PORT: String(port), LOG_LEVEL: 'warn' },
      stdio: 'ignore',
    });
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    const url = `http://127.0.0.1:${port}`;
    await waitFor('ingest ready', async () => (await fetch(`${url}/_ready`).catch(() => undefined))?.ok === true, 60_000);

    const body = JSON.stringify({ api_key: 'phc_shutdown', batch: [{ event: 'in flight', distinct_id: 'u', properties: {} }] });
    const socket = connect(port, '127.0.0.1');
    let response = '';
    socket.on('data', (d: Buffer) => (response += d.toString()));
    await new Promise((r) => socket.once('connect', r));
    socket.write(`POST /batch/ HTTP/1.1\r\nHost: x\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body.slice(0, 10)}`);
    await new Promise((r) => setTimeout(r, 200));

    child.kill('SIGTERM');
    // A new connection is refused (fetch would reuse a kept-alive one, so dial by hand).
    const refused = () =>
      new Promise<boolean>((resolve) => {
        const probe = connect(port, '127.0.0.1');
        probe.once('connect', () => (probe.destroy(), resolve(false)));
        probe.once('error', () => resolve(true));
      });
    await waitFor('listen socket closed', refused, 10_000);
    socket.write(body.slice(10));
    await waitFor('answer to the request in flight', () => response.includes('\r\n\r\n'), 10_000);
    expect(response).toMatch(/^HTTP\/1\.1 200 OK/);
    expect(response).toContain('{"status":1}');
    socket.destroy();
    expect(await exited).toBe(0);

    const info = await (await jetstreamManager(nc)).streams.info(STREAMS.events);
    expect(info.state.messages).toBe(1);
    await nc.close();
  });
});

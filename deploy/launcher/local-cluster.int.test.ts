// `npm start` as a user runs it: a child process with its own data dir. It must come up,
// accept events, restart a crashed child, stop cleanly, and resume with its data.
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { connect } from '@nats-io/transport-node';
import { connectNats, NatsAuthError, readClusterFile, type ClusterFile } from '../../lib/index.js';
import { ProcessedCounter } from '../../test/faults/processed.js';
import { waitFor } from '../../test/kit/index.js';

const dataDir = mkdtempSync(join(tmpdir(), 'spate-launcher-'));
chmodSync(dataDir, 0o711); // as root, PostgreSQL (running as `postgres`) keeps its files inside
const startScript = new URL('../start.ts', import.meta.url).pathname;

function launch(): ChildProcess {
  return spawn(process.execPath, ['--import', 'tsx', startScript], {
    env: { ...process.env, SPATE_DATA_DIR: dataDir, LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true, // its own process group, like a terminal session: Ctrl-C goes to the group
  });
}

async function ready(child: ChildProcess): Promise<ClusterFile> {
  let output = '';
  child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
  await waitFor('launcher ready', () => {
    if (output.includes('[spate] failed to start')) throw new Error('launcher exited');
    return output.includes('[spate] ready.');
  }, 90_000, 200).catch((err: unknown) => {
    throw new Error(`launcher did not start:\n${output}`, { cause: err });
  });
  return readClusterFile(join(dataDir, 'cluster.json'));
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function capture(c: ClusterFile, distinctId: string): Promise<number> {
  const res = await fetch(`${c.captureUrl}/capture/`, {
    method: 'POST',
    body: JSON.stringify({ api_key: c.projectApiKey, event: 'launcher test', distinct_id: distinctId }),
  });
  return res.status;
}

async function streamMessages(c: ClusterFile): Promise<number> {
  const nats = c.processes!.find((p) => p.role === 'nats')!;
  const jsz = (await (await fetch(`http://127.0.0.1:${nats.monitorPort as number}/jsz?streams=true`)).json()) as {
    account_details?: { stream_detail?: { name: string; state: { messages: number } }[] }[];
  };
  const streams = jsz.account_details?.flatMap((a) => a.stream_detail ?? []) ?? [];
  return streams.find((s) => s.name === 'EVENTS')?.state.messages ?? 0;
}

describe('npm start (local cluster)', () => {
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

  it('launcher - starts, accepts events, restarts a killed ingest node, stops everything, and resumes with its data', { timeout: 300_000 }, async () => {
    const first = launch();
    const c = await ready(first);
    expect(c).toMatchObject({ projectId: 1 });
    expect(c.projectApiKey).toMatch(/^phc_/);
    expect(c.processes!.map((p) => p.role).sort()).toEqual(['admin', 'ingest', 'nats', 'postgres', 'worker']);
    expect(c.personalApiKey).toMatch(/^phx_/);
    // NATS wants credentials: cluster.json's operator user gets in, nobody without; the generated
    // passwords are readable by the launcher's user only.
    expect(c.natsUser).toBe('spate-operator');
    const operator = await connect({ servers: c.natsUrl, user: c.natsUser, pass: c.natsPassword });
    await operator.close();
    await expect(connectNats(c.natsUrl, 'anonymous')).rejects.toThrow(NatsAuthError);
    expect(statSync(join(dataDir, 'secrets.json')).mode & 0o777).toBe(0o600);
    const secretKey = (JSON.parse(readFileSync(join(dataDir, 'secrets.json'), 'utf8')) as { secretKey: string }).secretKey;
    expect(Buffer.from(secretKey, 'base64')).toHaveLength(32);
    const orgs = await fetch(`${c.adminUrl}/api/organizations/`, { headers: { authorization: `Bearer ${c.personalApiKey}` } });
    expect(orgs.status).toBe(200);
    expect(((await orgs.json()) as { results: { id: string }[] }).results.map((o) => o.id)).toContain(c.organizationId);
    expect(await capture(c, 'before-crash')).toBe(200);

    // End to end: capture → EVENTS → worker → PROCESSED, with a person attached.
    const uuid = '0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b';
    const sent = await fetch(`${c.captureUrl}/capture/`, {
      method: 'POST',
      body: JSON.stringify({ api_key: c.projectApiKey, event: 'e2e', distinct_id: 'e2e-user', uuid }),
    });
    expect(sent.status).toBe(200);
    const processed = await ProcessedCounter.open(c);
    await waitFor('event processed', async () => {
      await processed.refresh();
      return processed.counts.get(uuid) === 1;
    }, 30_000, 200);
    await processed.close();

    const ingest = c.processes!.find((p) => p.role === 'ingest')!;
    process.kill(ingest.pid, 'SIGKILL');
    await waitFor('ingest restarted', async () => (await capture(c, 'after-crash').catch(() => 0)) === 200, 60_000, 200);
    const restarted = readClusterFile(join(dataDir, 'cluster.json')).processes!.find((p) => p.role === 'ingest')!;
    expect(restarted.pid).not.toBe(ingest.pid);
    const stored = await streamMessages(c);
    expect(stored).toBeGreaterThanOrEqual(2);

    first.kill('SIGTERM');
    await new Promise((r) => first.once('exit', r));
    const pids = readClusterFile(join(dataDir, 'cluster.json')).processes!.map((p) => p.pid);
    for (const pid of pids) expect(alive(pid), `pid ${pid} stopped`).toBe(false);

    const second = launch();
    const again = await ready(second);
    expect(again.projectApiKey).toBe(c.projectApiKey);
    expect(again.personalApiKey).toBe(c.personalApiKey);
    expect(again.natsPassword).toBe(c.natsPassword);
    // The key of the stored secrets too: a new one would make them undecryptable.
    expect((JSON.parse(readFileSync(join(dataDir, 'secrets.json'), 'utf8')) as { secretKey: string }).secretKey).toBe(secretKey);
    expect(again.organizationId).toBe(c.organizationId);
    expect(await streamMessages(again)).toBe(stored);
    // PostgreSQL kept the worker's state and PROCESSED its line: the resumed workers did not process it again.
    const db = new pg.Client({ connectionString: again.databaseUrl });
    await db.connect();
    const persons = await db.query("select count(*)::int as n from person_distinct_ids where distinct_id = 'e2e-user'");
    await db.end();
    expect(persons.rows[0].n).toBe(1);
    const afterRestart = await ProcessedCounter.open(again);
    await afterRestart.refresh();
    expect(afterRestart.counts.get(uuid)).toBe(1);
    await afterRestart.close();
    expect(await capture(again, 'after-restart')).toBe(200);
    // Ctrl-C in a terminal: SIGINT to the whole process group. Children stop in order, none restarts.
    let secondOutput = '';
    second.stdout!.on('data', (d: Buffer) => (secondOutput += d.toString()));
    process.kill(-second.pid!, 'SIGINT');
    await new Promise((r) => second.once('exit', r));
    expect(secondOutput).not.toMatch(/restarting/);
    for (const p of readClusterFile(join(dataDir, 'cluster.json')).processes!) expect(alive(p.pid), `${p.role} ${p.pid} stopped`).toBe(false);
    expect(existsSync(join(dataDir, 'ports.json'))).toBe(true);
  });
});

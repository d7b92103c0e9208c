// `npm start` as a user runs it: a child process with its own data dir. It must come up,
// accept events, restart a crashed child, stop cleanly, and resume with its data; and its children
// must end with it however it dies.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { connect } from '@nats-io/transport-node';
import { connectNats, NatsAuthError, readClusterFile, type ClusterFile } from '../../lib/index.js';
import { ProcessedCounter } from '../../test/faults/processed.js';
import { waitFor } from '../../test/kit/index.js';
import { findPostgresBinDir } from '../local/postgres.js';

const dataDir = mkdtempSync(join(tmpdir(), 'spate-launcher-'));
chmodSync(dataDir, 0o711); // as root, PostgreSQL (running as `postgres`) keeps its files inside
const orphansDir = mkdtempSync(join(tmpdir(), 'spate-orphans-'));
chmodSync(orphansDir, 0o711);
const startScript = new URL('../start.ts', import.meta.url).pathname;
const launched: ChildProcess[] = [];
/**
 * Every child pid seen, with its start time: killed after the tests whatever happened (a failing
 * run would leave them). The start time tells the process from a later one given the same pid
 * (pids wrap at 32,768 here): "still running" then means that very process, and afterAll never
 * kills what another test started since.
 */
const seen = new Map<number, string>();

/** The fields of /proc/PID/stat after the command: [0] the state, [19] the start time. */
function statFields(pid: number): string[] | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  } catch {
    return undefined;
  }
}

function remember(pid: number): void {
  const fields = statFields(pid);
  if (fields && !seen.has(pid)) seen.set(pid, fields[19]!);
}

/**
 * The launcher on `dir`, in its own process group as in a terminal session (Ctrl-C goes to the
 * group); with `viaParent`, started by a parent that waits for it, as npm does.
 */
function launch(dir = dataDir, viaParent = false, env: Record<string, string> = {}): ChildProcess {
  const args = ['--import', 'tsx', startScript];
  const parent = `require('node:child_process').spawn(process.execPath, ${JSON.stringify(args)}, { stdio: 'inherit' }); setInterval(() => {}, 1e9)`;
  const child = spawn(process.execPath, viaParent ? ['-e', parent] : args, {
    env: { ...process.env, SPATE_DATA_DIR: dir, LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  launched.push(child);
  return child;
}

/** What a launcher printed so far. */
function outputOf(child: ChildProcess): () => string {
  let output = '';
  child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
  return () => output;
}

async function ready(child: ChildProcess, dir = dataDir): Promise<ClusterFile> {
  const output = outputOf(child);
  await waitFor('launcher ready', () => {
    if (output().includes('[spate] failed to start')) throw new Error('launcher exited');
    return output().includes('[spate] ready.');
  }, 120_000, 200).catch((err: unknown) => {
    throw new Error(`launcher did not start:\n${output()}`, { cause: err });
  });
  const cluster = readClusterFile(join(dir, 'cluster.json'));
  for (const p of cluster.processes ?? []) remember(p.pid);
  return cluster;
}

/**
 * Running: the process seen with this pid exists and is no zombie (a child that exited, not yet
 * reaped, has ended); a process that took its pid later does not count.
 */
function alive(pid: number): boolean {
  const fields = statFields(pid);
  if (!fields || fields[0] === 'Z') return false;
  const started = seen.get(pid);
  return started === undefined || started === fields[19];
}

afterAll(() => {
  for (const pid of [...launched.map((p) => -p.pid!), ...[...seen.keys()].filter(alive)]) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  for (const dir of [dataDir, orphansDir]) rmSync(dir, { recursive: true, force: true });
});

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

  it('launcher - starts, accepts events, restarts a killed ingest node, stops everything, and resumes with its data', { timeout: 300_000 }, async () => {
    const first = launch(dataDir, false, { LOG_LEVEL: 'info' });
    const firstOutput = outputOf(first);
    const c = await ready(first);
    expect(c).toMatchObject({ projectId: 1 });
    // Its output is no terminal: the children's log lines stay JSON, after their names.
    const adminLine = firstOutput().split('\n').find((l) => l.startsWith('[admin] {') && l.includes('admin server listening'));
    expect(JSON.parse(adminLine!.slice('[admin] '.length))).toMatchObject({ level: 30, name: 'admin', msg: 'admin server listening' });
    expect(firstOutput()).toContain(`live:     ${c.adminUrl}/`);
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

// Its children never outlive it. In this file, not its own: two launchers started at once would
// take the same preferred ports.
describe('npm start without orphans', () => {
  it('launcher - killed with -9, every child stops within 5 s, PostgreSQL cleanly; the next start on the data dir works', { timeout: 300_000 }, async () => {
    const first = launch(orphansDir);
    const c = await ready(first, orphansDir);
    const children = c.processes!;
    expect(children.map((p) => p.role).sort()).toEqual(['admin', 'ingest', 'nats', 'postgres', 'worker']);
    expect(await capture(c, 'before-kill')).toBe(200);
    // nats-server and PostgreSQL run under setpriv --pdeathsig, which execs them: the pids are theirs.
    const nats = children.find((p) => p.role === 'nats')!;
    expect(readFileSync(`/proc/${nats.pid}/cmdline`, 'utf8').split('\0')[0]).toMatch(/nats-server$/);

    const killedAt = Date.now();
    process.kill(first.pid!, 'SIGKILL');
    await waitFor('every child gone', () => children.every((p) => !alive(p.pid)), 10_000, 50).catch(() => undefined);
    const elapsed = Date.now() - killedAt;
    const left = children.filter((p) => alive(p.pid)).map((p) => `${p.role} ${p.pid}`);
    expect(left, 'children still running 10 s after the launcher died').toEqual([]);
    expect(elapsed).toBeLessThan(5_000);
    console.log(`every child of the launcher ended ${elapsed} ms after its kill -9`);

    // PostgreSQL had its fast shutdown (SIGINT), not a crash: nothing to recover at the next start.
    const pgDir = children.find((p) => p.role === 'postgres')!.dir as string;
    const control = execFileSync(join(findPostgresBinDir(), 'pg_controldata'), [pgDir], { encoding: 'utf8', env: { ...process.env, LC_ALL: 'C' } });
    expect(control).toMatch(/Database cluster state:\s+shut down$/m);
    expect(existsSync(join(pgDir, 'postmaster.pid'))).toBe(false);

    // The same data dir starts again, with its data, through a parent that then dies: the launcher
    // notices (its parent changed) and stops the cluster in order.
    const second = launch(orphansDir, true);
    const secondOutput = outputOf(second);
    const again = await ready(second, orphansDir);
    expect(again.projectApiKey).toBe(c.projectApiKey);
    expect(await capture(again, 'after-restart')).toBe(200);
    const launcherPid = Number(execFileSync('pgrep', ['-P', String(second.pid)], { encoding: 'utf8' }).trim().split('\n')[0]);
    remember(launcherPid);
    expect(alive(launcherPid)).toBe(true);
    process.kill(second.pid!, 'SIGKILL');
    await waitFor('the launcher stopped everything and exited', () => !alive(launcherPid) && again.processes!.every((p) => !alive(p.pid)), 60_000, 100).catch(() => undefined);
    expect(again.processes!.filter((p) => alive(p.pid)).map((p) => p.role)).toEqual([]);
    expect(alive(launcherPid)).toBe(false);
    expect(secondOutput()).toContain('parent exited: stopping');
    expect(secondOutput()).not.toMatch(/restarting in/);
  });
});

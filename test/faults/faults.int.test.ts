// Fault survival (issue 6): the whole cluster as `npm start -- --nats-nodes 3 --ingest 2
// --workers 2 --stream-partitions 3` runs it (FAULT_STREAM_PARTITIONS=1 for single streams), under
// a steady load of capture and batch requests, while parts die:
//   1. kill -9 one ingest node of two;   2. kill -9 one worker of two;
//   3. kill -9 one NATS node of three (the supervisor brings it back);   4. restart PostgreSQL.
// After each, every event that got a 200 must appear exactly once in PROCESSED, and the system
// must be healthy again without manual action. Prints: sent, acknowledged, processed,
// duplicates, lost, recovery time.
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jetstreamManager } from '@nats-io/jetstream';
import { allStreamNames, connectNats, readClusterFile, streamLayout, type ClusterFile } from '../../lib/index.js';
import { waitFor } from '../kit/index.js';
import { newStats, runLoad, type LoadStats } from './load.js';
import { ProcessedCounter } from './processed.js';

type Role = 'ingest' | 'worker' | 'nats' | 'postgres';

interface Outcome {
  scenario: string;
  sent: number;
  acknowledged: number;
  processed: number;
  duplicates: number;
  lost: number;
  healthyAfterMs: number;
  caughtUpAfterMs: number;
}

const LOAD_MS = Number(process.env.FAULT_LOAD_MS ?? 15_000);
/** STREAM_PARTITIONS of the cluster: a 3-node cluster's capture streams split in three, a leader on each node. */
const PARTITIONS = Number(process.env.FAULT_STREAM_PARTITIONS ?? 3);
const FAULT_AFTER_MS = 4_000;

const dataDir = mkdtempSync(join(tmpdir(), 'spate-faults-'));
chmodSync(dataDir, 0o711); // PostgreSQL runs as `postgres` when we are root
const startScript = new URL('../../deploy/start.ts', import.meta.url).pathname;
let launcher: ChildProcess;
let output = '';
let cluster: ClusterFile;
let processed: ProcessedCounter;
const outcomes: Outcome[] = [];

const clusterFile = () => readClusterFile(join(dataDir, 'cluster.json'));
const pidsOf = (role: Role) => clusterFile().processes!.filter((p) => p.role === role);

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function ok(url: string): Promise<boolean> {
  const res = await fetch(url, { signal: AbortSignal.timeout(2_000) }).catch(() => undefined);
  return res?.ok === true;
}

async function postgresAnswers(url: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2_000 });
  try {
    await client.connect();
    await client.query('select 1');
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => undefined);
  }
}

const SHARDS = 16;

/** Shards each worker reports owning on /_ready (undefined: not ready). */
async function workerShards(port: number): Promise<number[] | undefined> {
  const res = await fetch(`http://127.0.0.1:${port}/_ready`, { signal: AbortSignal.timeout(2_000) }).catch(() => undefined);
  if (!res?.ok) return undefined;
  return ((await res.json()) as { shards?: number[] }).shards;
}

/**
 * Every process alive, every readiness check passing, PostgreSQL answering queries, and every
 * shard owned by exactly one live worker (a killed worker's shards have moved).
 */
async function healthy(): Promise<boolean> {
  const c = clusterFile();
  if (!c.processes!.every((p) => alive(p.pid))) return false;
  const checks = [ok(`${c.captureUrl}/_ready`), ok(`${c.adminUrl}/_health`), postgresAnswers(c.databaseUrl!)];
  for (const p of c.processes!) {
    if (p.role === 'nats') checks.push(ok(`http://127.0.0.1:${p.monitorPort as number}/healthz`));
  }
  const owned = await Promise.all(c.processes!.filter((p) => p.role === 'worker').map((p) => workerShards(p.metricsPort as number)));
  const shards = owned.flatMap((s) => s ?? []);
  const covered = owned.every((s) => s !== undefined) && shards.length === SHARDS && new Set(shards).size === SHARDS;
  return covered && (await Promise.all(checks)).every(Boolean);
}

async function survive(scenario: string, label: string, fault: () => Promise<void> | void): Promise<Outcome> {
  const stats: LoadStats = newStats();
  const load = runLoad({ captureUrl: cluster.captureUrl, apiKey: cluster.projectApiKey, concurrency: 6, durationMs: LOAD_MS, users: 300, retries: 10, label }, stats);
  await new Promise((r) => setTimeout(r, FAULT_AFTER_MS));
  const faultAt = Date.now();
  await fault();
  // Healthy again: the first moment every process is up and ready after the fault.
  await new Promise((r) => setTimeout(r, 500));
  await waitFor(`${scenario}: healthy again`, healthy, 120_000, 250);
  const healthyAfterMs = Date.now() - faultAt;
  await load;
  // Caught up: every acknowledged event is in PROCESSED.
  await waitFor(`${scenario}: every acknowledged event processed`, async () => {
    await processed.refresh();
    for (const uuid of stats.acknowledged) if (!processed.counts.has(uuid)) return false;
    return true;
  }, 180_000, 500);
  const caughtUpAfterMs = Date.now() - faultAt;
  // Give late duplicates (if any) time to show up before counting.
  await new Promise((r) => setTimeout(r, 3_000));
  await processed.refresh();
  let present = 0;
  let duplicates = 0;
  let lost = 0;
  for (const uuid of stats.sent) {
    const n = processed.counts.get(uuid) ?? 0;
    if (n > 0) present++;
    if (n > 1) duplicates++;
    if (n === 0 && stats.acknowledged.has(uuid)) lost++;
  }
  const outcome = { scenario, sent: stats.sent.size, acknowledged: stats.acknowledged.size, processed: present, duplicates, lost, healthyAfterMs, caughtUpAfterMs };
  outcomes.push(outcome);
  return outcome;
}

function kill(role: Role, index = 0, signal: NodeJS.Signals = 'SIGKILL'): () => void {
  return () => {
    const target = pidsOf(role)[index]!;
    process.kill(target.pid, signal);
  };
}

describe('fault survival', () => {
  beforeAll(async () => {
    launcher = spawn(process.execPath, ['--import', 'tsx', startScript, '--nats-nodes', '3', '--ingest', '2', '--workers', '2', '--stream-partitions', String(PARTITIONS)], {
      env: { ...process.env, SPATE_DATA_DIR: dataDir, LOG_LEVEL: 'warn' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    launcher.stdout!.on('data', (d: Buffer) => (output += d.toString()));
    launcher.stderr!.on('data', (d: Buffer) => (output += d.toString()));
    await waitFor('cluster ready', () => {
      if (output.includes('[spate] failed to start')) throw new Error(`launcher exited:\n${output}`);
      return output.includes('[spate] ready.');
    }, 180_000, 250);
    cluster = clusterFile();
    processed = await ProcessedCounter.open(cluster);
  });

  afterAll(async () => {
    await processed?.close();
    if (launcher && launcher.exitCode === null) {
      launcher.kill('SIGTERM');
      await new Promise((r) => launcher.once('exit', r));
    }
    const header = ['scenario', 'sent', 'acknowledged', 'processed', 'duplicates', 'lost', 'healthy after', 'caught up after'];
    const rows = outcomes.map((o) => [
      o.scenario,
      String(o.sent),
      String(o.acknowledged),
      String(o.processed),
      String(o.duplicates),
      String(o.lost),
      `${(o.healthyAfterMs / 1000).toFixed(1)} s`,
      `${(o.caughtUpAfterMs / 1000).toFixed(1)} s`,
    ]);
    const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
    const line = (cells: string[]) => `| ${cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join(' | ')} |`;
    console.log(
      [
        '',
        `fault survival (npm start -- --nats-nodes 3 --ingest 2 --workers 2 --stream-partitions ${PARTITIONS}; times from the fault):`,
        line(header),
        `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`,
        ...rows.map(line),
        '',
      ].join('\n'),
    );
    rmSync(dataDir, { recursive: true, force: true });
  });

  it(`faults - the cluster runs with 3 NATS nodes (streams at R3, capture streams in ${PARTITIONS} partitions), 2 ingest nodes and 2 workers`, async () => {
    const roles = cluster.processes!.map((p) => p.role);
    expect(roles.filter((r) => r === 'nats')).toHaveLength(3);
    expect(roles.filter((r) => r === 'ingest')).toHaveLength(2);
    expect(roles.filter((r) => r === 'worker')).toHaveLength(2);
    const nc = await connectNats(cluster.natsUrl, 'faults-check', { user: cluster.natsUser, pass: cluster.natsPassword });
    try {
      const jsm = await jetstreamManager(nc);
      for (const name of allStreamNames(streamLayout(SHARDS, PARTITIONS))) {
        const info = await jsm.streams.info(name);
        expect(info.config.num_replicas, name).toBe(3);
        expect(info.cluster?.replicas ?? [], name).toHaveLength(2); // the leader plus two followers
      }
    } finally {
      await nc.close();
    }
  });

  const scenarios: [string, string, () => () => Promise<void> | void][] = [
    ['kill -9 one ingest node of two', 'ingk', () => kill('ingest')],
    ['kill -9 one worker of two', 'wrkk', () => kill('worker')],
    ['kill -9 one NATS node of three', 'natk', () => kill('nats', 1)],
    ['restart PostgreSQL', 'pgrs', () => kill('postgres', 0, 'SIGINT')],
  ];

  for (const [scenario, label, fault] of scenarios) {
    it(`faults - ${scenario}: every acknowledged event processed exactly once, healthy again`, { timeout: 600_000 }, async () => {
      const o = await survive(scenario, label, fault());
      expect(o.acknowledged).toBeGreaterThan(100);
      expect(o.lost).toBe(0);
      expect(o.duplicates).toBe(0);
    });
  }
});

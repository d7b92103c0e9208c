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
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jetstreamManager } from '@nats-io/jetstream';
import { allStreamNames, connectNats, readClusterFile, streamLayout, type ClusterFile } from '../../lib/index.js';
import { waitFor } from '../kit/index.js';
import { ProcessedCounter } from './processed.js';
import { ok, pidAlive, postgresAnswers, shardsCovered, workerShards } from './probes.js';
import { markdownTable, seconds, survive, type Outcome, type ScenarioContext } from './scenario.js';

type Role = 'ingest' | 'worker' | 'nats' | 'postgres';

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

const SHARDS = 16;

/**
 * What is not healthy now: a process not alive, a readiness check failing, PostgreSQL not
 * answering queries, or a shard not owned by exactly one live worker (a killed worker's shards
 * have to move).
 */
async function unhealthy(): Promise<string[]> {
  const c = clusterFile();
  const failing = c.processes!.filter((p) => !pidAlive(p.pid)).map((p) => `${(p.name as string | undefined) ?? p.role} not running`);
  const checks: [string, Promise<boolean>][] = [
    ['capture /_ready', ok(`${c.captureUrl}/_ready`)],
    ['admin /_health', ok(`${c.adminUrl}/_health`)],
    ['PostgreSQL', postgresAnswers(c.databaseUrl!)],
  ];
  for (const p of c.processes!) {
    if (p.role === 'nats') checks.push([`${(p.name as string | undefined) ?? 'nats'} /healthz`, ok(`http://127.0.0.1:${p.monitorPort as number}/healthz`)]);
  }
  const owned = await Promise.all(c.processes!.filter((p) => p.role === 'worker').map((p) => workerShards(`http://127.0.0.1:${p.metricsPort as number}`)));
  if (!shardsCovered(owned, SHARDS)) failing.push(`shards not each owned by one ready worker (${JSON.stringify(owned)})`);
  for (const [name, check] of checks) if (!(await check)) failing.push(name);
  return failing;
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
    const rows = outcomes.map((o) => [o.scenario, ...[o.sent, o.acknowledged, o.processed, o.duplicates, o.lost].map(String), seconds(o.healthyAfterMs), seconds(o.caughtUpAfterMs)]);
    console.log(['', `fault survival (npm start -- --nats-nodes 3 --ingest 2 --workers 2 --stream-partitions ${PARTITIONS}; times from the fault):`, markdownTable(header, rows), ''].join('\n'));
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
      const ctx: ScenarioContext = {
        load: { captureUrl: cluster.captureUrl, apiKey: cluster.projectApiKey, concurrency: 6, durationMs: LOAD_MS, users: 300, retries: 10 },
        processed,
        unhealthy,
        faultAfterMs: FAULT_AFTER_MS,
      };
      const o = await survive(ctx, scenario, label, fault());
      outcomes.push(o);
      expect(o.acknowledged).toBeGreaterThan(100);
      expect(o.lost).toBe(0);
      expect(o.duplicates).toBe(0);
    });
  }
});

// Batch exports end to end, as a user drives them: `npm start`'s cluster (the launcher, from
// source: PostgreSQL, NATS, admin, ingest, a worker), events through capture, exports and a
// backfill through the admin API, and what each destination then holds — S3 (s3rver), a
// PostgreSQL database, an HTTP receiver. The worker's export clock runs ahead
// (SPATE_TEST_EXPORT_CLOCK_OFFSET_MS) so that an "every 5 minutes" interval ends within the
// test; its scheduled run and the backfill cover the same events, and each event still reaches
// each destination exactly once.
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { gunzipSync } from 'node:zlib';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readClusterFile, type ClusterFile } from '../../lib/index.js';
import { startS3, waitFor, type S3Handle } from '../kit/index.js';

const root = resolve(import.meta.dirname, '../..');
const dataDir = mkdtempSync(join(tmpdir(), 'spate-exports-e2e-'));
chmodSync(dataDir, 0o711);

/** The current 5-minute interval on the worker's clock ends this long after the launch. */
const FIRST_END_AFTER_MS = 100_000;

let launcher: ChildProcess;
let cluster: ClusterFile;
let s3: S3Handle;
let intervalEnd: number;
let output = '';
const received: Array<{ uuid: string }> = [];
const server = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const raw = Buffer.concat(chunks);
    const body = JSON.parse((req.headers['content-encoding'] === 'gzip' ? gunzipSync(raw) : raw).toString()) as { batch: Array<{ uuid: string }> };
    received.push(...body.batch);
    res.writeHead(200).end('{"status":1}');
  });
});

beforeAll(async () => {
  s3 = await startS3(['e2e']);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const launchAt = Date.now();
  intervalEnd = Math.ceil((launchAt + FIRST_END_AFTER_MS) / 300_000) * 300_000;
  const offset = intervalEnd - (launchAt + FIRST_END_AFTER_MS);
  launcher = spawn(process.execPath, ['--import', 'tsx', join(root, 'deploy/start.ts')], {
    cwd: root,
    env: { ...process.env, SPATE_DATA_DIR: dataDir, LOG_LEVEL: 'warn', SPATE_TEST_EXPORT_CLOCK_OFFSET_MS: String(offset), EXPORT_GRACE: '2s' },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  launcher.stdout!.on('data', (d: Buffer) => (output += d.toString()));
  launcher.stderr!.on('data', (d: Buffer) => (output += d.toString()));
  await waitFor('npm start ready', () => {
    if (output.includes('[spate] failed to start') || launcher.exitCode !== null) throw new Error(`the launcher exited:\n${output}`);
    return output.includes('[spate] ready.');
  }, 90_000, 200);
  cluster = readClusterFile(join(dataDir, 'cluster.json'));
}, 120_000);

afterAll(async () => {
  if (launcher?.pid && launcher.exitCode === null) {
    const exited = new Promise((r) => launcher.once('exit', r));
    process.kill(-launcher.pid, 'SIGTERM');
    await exited;
  }
  await s3?.stop();
  await new Promise((r) => server.close(r));
  rmSync(dataDir, { recursive: true, force: true });
}, 60_000);

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- the test asserts on the shape it reads
async function api(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(`${cluster.adminUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${cluster.personalApiKey}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

describe('batch exports end to end', () => {
  it('exports - POST batch_exports + POST backfill through capture, worker and admin: S3 objects, PostgreSQL rows and HTTP requests hold each event once; runs show in latest_runs', { timeout: 400_000 }, async () => {
    const base = `/api/organizations/${cluster.organizationId}/batch_exports/`;
    // The destination database, on the cluster's own PostgreSQL.
    const admin = new pg.Client({ connectionString: cluster.databaseUrl });
    await admin.connect();
    await admin.query('CREATE DATABASE export_target');
    await admin.end();
    const target = new URL(cluster.databaseUrl!);
    const destinations = {
      S3: { bucket_name: 'e2e', region: 'us-east-1', prefix: 'spate/{table}', endpoint_url: s3.endpoint, aws_access_key_id: s3.accessKeyId, aws_secret_access_key: s3.secretAccessKey, compression: 'gzip' },
      Postgres: { host: target.hostname, port: Number(target.port), user: target.username || 'postgres', password: 'unused', database: 'export_target', table_name: 'events' },
      HTTP: { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/batch/`, token: 'phc_receiver' },
    };
    const ids: Record<string, string> = {};
    for (const [type, config] of Object.entries(destinations)) {
      const created = await api('POST', base, { name: `to ${type}`, interval: 'every 5 minutes', destination: { type, config } });
      expect(created.status, JSON.stringify(created.body)).toBe(201);
      ids[type] = created.body.id as string;
    }

    // Events stamped in an hour two hours ago, sent now: the scheduled run (by arrival) and the
    // backfill of that hour (by timestamp) both cover them.
    const hour = Math.floor(Date.now() / 3_600_000) * 3_600_000 - 2 * 3_600_000;
    const batch = Array.from({ length: 300 }, (_, i) => ({
      event: i % 2 ? 'pageview' : 'signup',
      distinct_id: `user-${i % 17}`,
      uuid: crypto.randomUUID(),
      timestamp: new Date(hour + i * 10_000).toISOString(),
      properties: { i },
    }));
    const sent = await fetch(`${cluster.captureUrl}/batch/`, { method: 'POST', body: JSON.stringify({ api_key: cluster.projectApiKey, batch }) });
    expect(sent.status).toBe(200);
    const backfillRange = { start_at: new Date(hour).toISOString(), end_at: new Date(hour + 3_600_000).toISOString() };
    for (const id of Object.values(ids)) expect((await api('POST', `${base}${id}/backfill/`, backfillRange)).status).toBe(200);

    // Each export: the backfill's 12 runs (5-minute intervals of the hour) and the first scheduled run
    // Completed, as the admin server stored them from the runner's reports (latest_runs shows the
    // newest ten of them).
    const scheduledStart = new Date(intervalEnd - 300_000).toISOString();
    const adminDb = new pg.Client({ connectionString: cluster.databaseUrl });
    await adminDb.connect();
    try {
      for (const [type, id] of Object.entries(ids)) {
        let seen: unknown;
        await waitFor(`${type}: backfill and scheduled runs completed`, async () => {
          const { rows } = await adminDb.query<{ backfill: boolean; start: Date; status: string; records: number | null }>(
            'SELECT backfill_id IS NOT NULL AS backfill, data_interval_start AS start, status, records_completed AS records FROM batch_export_runs WHERE batch_export_id = $1',
            [id],
          );
          seen = rows;
          if (rows.some((r) => r.status === 'Failed')) throw new Error(`${type}: a run failed: ${JSON.stringify(rows)}`);
          const backfill = rows.filter((r) => r.backfill);
          const scheduled = rows.find((r) => !r.backfill && r.start.toISOString() === scheduledStart);
          return backfill.length === 12 && backfill.every((r) => r.status === 'Completed') && scheduled?.status === 'Completed';
        }, 200_000, 1_000).catch((err: unknown) => {
          throw new Error(`${(err as Error).message}; scheduled ${scheduledStart}; runs ${JSON.stringify(seen)}\n${output.slice(-3000)}`);
        });
        // Between them, the scheduled run and the backfill delivered each event once.
        const { rows } = await adminDb.query<{ n: number }>(`SELECT sum(records_completed)::int AS n FROM batch_export_runs WHERE batch_export_id = $1 AND status = 'Completed'`, [id]);
        expect(rows[0]!.n, type).toBe(300);
      }
    } finally {
      await adminDb.end();
    }
    const shown = (await api('GET', `${base}${ids.S3}/`)).body.latest_runs as Array<{ status: string }>;
    expect(shown).toHaveLength(10);
    expect(shown.every((r) => r.status === 'Completed')).toBe(true);

    const want = batch.map((e) => e.uuid).sort();
    const s3Uuids: string[] = [];
    for (const key of await s3.list('e2e', 'spate/events/')) {
      for (const line of gunzipSync(await s3.get('e2e', key)).toString().split('\n')) if (line) s3Uuids.push((JSON.parse(line) as { uuid: string }).uuid);
    }
    expect(s3Uuids.sort()).toEqual(want);

    const db = new pg.Client({ connectionString: `${cluster.databaseUrl!.replace(/\/[^/]*$/, '')}/export_target` });
    await db.connect();
    const rows = (await db.query<{ uuid: string }>('SELECT uuid FROM events')).rows.map((r) => r.uuid);
    await db.end();
    expect(rows.sort()).toEqual(want);
    expect(received.map((e) => e.uuid).sort()).toEqual(want);
  });
});

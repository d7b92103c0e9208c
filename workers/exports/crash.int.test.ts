// kill -9 of the worker process running an export mid-run: the run moves to another worker
// with the export's lease and completes there; each destination ends with every event of the
// interval exactly once (S3 keys overwritten, PostgreSQL rows committed once with the ledger).
import { gunzipSync } from 'node:zlib';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import type { CapturedEvent } from '../../lib/index.js';
import { s3Destination, startExportRig, type ExportRig } from '../../test/exports/harness.js';
import { freshDatabase, waitFor } from '../../test/kit/index.js';
import { capture, publishEvents, spawnWorker, waitForProcessed, workerEnv, type WorkerProcess } from '../../test/workers/harness.js';

let rig: ExportRig | undefined;
const processes: WorkerProcess[] = [];
afterEach(async () => {
  for (const w of processes.splice(0)) {
    if (w.child.exitCode === null && w.child.signalCode === null) {
      w.kill('SIGKILL');
      await w.exited;
    }
  }
  await rig?.stop();
  rig = undefined;
});

describe('exports crash safety', () => {
  it('exports - kill -9 mid-run: the run completes on another worker, S3 objects and PostgreSQL rows hold every event exactly once', async () => {
    rig = await startExportRig({ worker: false });
    const databaseUrl = await freshDatabase();
    const env = { ...workerEnv(rig.nats.url, databaseUrl), EXPORT_EGRESS_ALLOW: 'loopback', WORKER_LEASE_TTL: '3s' };
    const victim = await spawnWorker('victim', { ...env, SPATE_TEST_FAULT: 'kill-during-export:6000' });
    processes.push(victim);
    await victim.statusUrl();

    const start = Date.parse('2024-05-01T12:00:00Z');
    const sent: CapturedEvent[] = Array.from({ length: 20_000 }, (_, i) =>
      capture(1, 'pageview', `user-${i % 503}`, { i, padding: 'p'.repeat(100) }, { timestamp: new Date(start + i * 150).toISOString() }),
    );
    await publishEvents(rig.js, sent);
    await waitForProcessed(rig.nc, sent.length, 120_000);

    const destUrl = await freshDatabase();
    const u = new URL(destUrl);
    const s3 = await rig.putExport({
      id: crypto.randomUUID(),
      destination: s3Destination(rig, { prefix: 'crash', max_file_size_mb: 1 }),
    });
    const postgres = await rig.putExport({
      id: crypto.randomUUID(),
      destination: { type: 'Postgres', config: { host: u.hostname, port: Number(u.port), user: 'postgres', password: 'unused', database: u.pathname.slice(1), table_name: 'events' } },
    });
    const window = { start: '2024-05-01T12:00:00.000Z', end: '2024-05-01T13:00:00.000Z' };
    const b1 = await rig.backfill(s3, window.start, window.end);
    const b2 = await rig.backfill(postgres, window.start, window.end);

    await victim.exited;
    expect(victim.child.signalCode).toBe('SIGKILL');
    // Whatever the victim left: no run of it completed.
    expect(rig.runs().filter((l) => l.status === 'Completed')).toEqual([]);

    const survivor = await spawnWorker('survivor', env);
    processes.push(survivor);
    const s3Done = await rig.waitForRun('the S3 run on the survivor', (l) => l.backfill_id === b1 && l.status === 'Completed', 90_000);
    const pgDone = await rig.waitForRun('the PostgreSQL run on the survivor', (l) => l.backfill_id === b2 && l.status === 'Completed', 90_000);
    expect(s3Done.records_completed).toBe(20_000);
    expect(pgDone.records_completed).toBe(20_000);

    const keys = await rig.s3.list('exports', 'crash/');
    const uuids: string[] = [];
    for (const key of keys.filter((k) => k.endsWith('.jsonl.gz'))) {
      for (const line of gunzipSync(await rig.s3.get('exports', key)).toString().split('\n')) if (line) uuids.push((JSON.parse(line) as { uuid: string }).uuid);
    }
    expect(uuids).toHaveLength(sent.length);
    expect(new Set(uuids).size).toBe(sent.length);
    const manifest = JSON.parse((await rig.s3.get('exports', keys.find((k) => k.endsWith('_manifest.json'))!)).toString()) as { files: string[] };
    expect(manifest.files.sort()).toEqual(keys.filter((k) => k.endsWith('.jsonl.gz')));

    const db = new pg.Client({ connectionString: destUrl });
    await db.connect();
    try {
      const { rows } = await db.query<{ n: number; distinct: number }>('SELECT count(*)::int AS n, count(DISTINCT uuid)::int AS distinct FROM events');
      expect(rows[0]).toEqual({ n: sent.length, distinct: sent.length });
    } finally {
      await db.end();
    }
    await waitFor('the survivor to hold both exports', async () => /^spate_export_owned(\{[^}]*\})? 2$/m.test(await fetch(`${await survivor.statusUrl()}/metrics`).then((r) => r.text())), 10_000);
  });
});

// The exports role against real servers: nats-server, PostgreSQL, s3rver; events go through the
// persons role onto PROCESSED first, as in production.
import { gunzipSync } from 'node:zlib';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import type { BatchExportRunLine, CapturedEvent } from '../../lib/index.js';
import { freshDatabase, waitFor } from '../../test/kit/index.js';
import { EventHooks, type ExportClock } from '../index.js';
import { s3Destination, startExportRig, type ExportRig } from '../../test/exports/harness.js';
import { capture, publishEvents, waitForProcessed } from '../../test/workers/harness.js';

let rig: ExportRig | undefined;
afterEach(async () => {
  await rig?.stop();
  rig = undefined;
});

/** `count` events of project 1 with timestamps spread evenly over [from, to). */
function eventsBetween(count: number, from: string, to: string, names = ['pageview', 'signup', 'click']): CapturedEvent[] {
  const start = Date.parse(from);
  const step = (Date.parse(to) - start) / count;
  return Array.from({ length: count }, (_, i) =>
    capture(1, names[i % names.length]!, `user-${i % 37}`, { i, $current_url: 'https://example.com/' }, { timestamp: new Date(start + Math.floor(i * step)).toISOString() }),
  );
}

function jsonLines(body: Buffer, gzip: boolean): Array<Record<string, unknown>> {
  const text = (gzip ? gunzipSync(body) : body).toString('utf8');
  return text.split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>);
}

/** A clock the test moves: `offset` ms ahead of real time. */
function movableClock(): ExportClock & { offset: number } {
  const clock = { offset: 0, now: () => Date.now() + clock.offset, toReal: (t: number) => t - clock.offset };
  return clock;
}

/** Puts the clock so that the current 5-minute interval ends `inMs` from now (real time); returns that end. */
function endIntervalIn(clock: { offset: number }, inMs: number): number {
  const target = Date.now() + inMs;
  const end = Math.ceil((target + 1) / 300_000) * 300_000;
  clock.offset = end - target;
  return end;
}

async function postgresDestination(): Promise<{ url: string; config: Record<string, unknown> }> {
  const url = await freshDatabase();
  const u = new URL(url);
  return { url, config: { host: u.hostname, port: Number(u.port), user: 'postgres', password: 'unused', database: u.pathname.slice(1), schema: 'public', table_name: 'exported_events' } };
}

/** The value of the series of `name` whose labels include `labels` (NaN when there is none). */
function metricValue(text: string, name: string, labels: Record<string, string>): number {
  for (const line of text.split('\n')) {
    const m = /^(\w+)\{(.*)\} (\S+)$/.exec(line);
    if (m?.[1] !== name) continue;
    const has = Object.fromEntries([...m[2]!.matchAll(/(\w+)="([^"]*)"/g)].map((l) => [l[1], l[2]]));
    if (Object.entries(labels).every(([k, v]) => has[k] === v)) return Number(m[3]);
  }
  return Number.NaN;
}

describe('exports', () => {
  it('exports - a backfill to S3 writes one gzip JSONLines object per interval, each event of it once, read back', async () => {
    rig = await startExportRig();
    const sent = eventsBetween(300, '2024-05-01T12:00:00Z', '2024-05-01T14:00:00Z');
    await publishEvents(rig.js, sent);
    await waitForProcessed(rig.nc, sent.length);

    const record = await rig.putExport({ id: crypto.randomUUID(), destination: s3Destination(rig), interval: 'hour' });
    const backfillId = await rig.backfill(record, '2024-05-01T12:00:00.000Z', '2024-05-01T14:00:00.000Z');
    for (const start of ['2024-05-01T12:00:00.000Z', '2024-05-01T13:00:00.000Z']) {
      await rig.waitForRun(`backfill run ${start} completed`, (l) => l.backfill_id === backfillId && l.data_interval_start === start && l.status === 'Completed');
    }
    const keys = await rig.s3.list('exports');
    expect(keys).toEqual([
      `posthog/2024-05/2024-05-01T12:00:00+00:00-2024-05-01T13:00:00+00:00-backfill-${backfillId}.jsonl.gz`,
      `posthog/2024-05/2024-05-01T13:00:00+00:00-2024-05-01T14:00:00+00:00-backfill-${backfillId}.jsonl.gz`,
    ]);
    const first = jsonLines(await rig.s3.get('exports', keys[0]!), true);
    const second = jsonLines(await rig.s3.get('exports', keys[1]!), true);
    const inHour = (e: CapturedEvent, hour: number) => new Date(e.timestamp).getUTCHours() === hour;
    expect(first.map((l) => l.uuid).sort()).toEqual(sent.filter((e) => inHour(e, 12)).map((e) => e.uuid).sort());
    expect(second.map((l) => l.uuid).sort()).toEqual(sent.filter((e) => inHour(e, 13)).map((e) => e.uuid).sort());
    // The contract's fields, in a fixed order, timestamps as Python writes them.
    expect(Object.keys(first[0]!)).toEqual(['uuid', 'event', 'properties', 'distinct_id', 'team_id', 'timestamp', 'person_id', 'elements_chain', 'set', 'set_once', 'created_at', '_inserted_at']);
    const line = first.find((l) => l.uuid === sent[0]!.uuid)!;
    expect(line).toMatchObject({ event: 'pageview', distinct_id: 'user-0', team_id: 1, timestamp: '2024-05-01T12:00:00+00:00', properties: { i: 0 } });
    expect(line.person_id).toMatch(/^[0-9a-f-]{36}$/);
    expect(line.created_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\+00:00$/);
    const done = rig.runs().filter((l) => l.backfill_id === backfillId && l.status === 'Completed');
    expect(done.map((l) => l.records_completed).sort()).toEqual([150, 150]);
    // Interval by interval, oldest first: the second starts once the first completed.
    const steps = rig.runs().filter((l) => l.backfill_id === backfillId && (l.status === 'Running' || l.status === 'Completed'));
    expect(steps.map((l) => `${l.data_interval_start!.slice(11, 16)} ${l.status}`)).toEqual(['12:00 Running', '12:00 Completed', '13:00 Running', '13:00 Completed']);
  });

  it('exports - a backfill asked for right after the events were sent waits for the workers, then exports each of them once', async () => {
    // The persons workers are held back: what was captured is not on PROCESSED yet when the backfill starts.
    const hooks = new EventHooks();
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    hooks.add('hold', () => held);
    rig = await startExportRig({ deps: { eventHooks: hooks }, env: { EXPORT_BACKFILL_CATCH_UP: '1s' } });
    const sent = eventsBetween(200, '2024-05-01T12:00:00Z', '2024-05-01T13:00:00Z');
    await publishEvents(rig.js, sent);
    const record = await rig.putExport({ id: crypto.randomUUID(), destination: s3Destination(rig, { prefix: 'catch-up' }), interval: 'hour' });
    const backfillId = await rig.backfill(record, '2024-05-01T12:00:00.000Z', '2024-05-01T13:00:00.000Z');
    const mine = (l: BatchExportRunLine) => l.backfill_id === backfillId;

    try {
      // It waits (logged), and past EXPORT_BACKFILL_CATCH_UP the attempt is FailedRetryable, not an empty Completed.
      const retry = await rig.waitForRun('the attempt given up while the workers are behind', (l) => mine(l) && l.status === 'FailedRetryable', 30_000);
      expect(retry.latest_error).toMatch(/^the workers have not yet processed every event captured before this backfill run \(EVENTS shard \d+: sequence \d+ not processed, position \d+/);
      expect(rig.logs().some((l) => l.message.includes('Waiting for the workers to process the events captured before this run'))).toBe(true);
      expect(rig.runs().filter((l) => mine(l) && l.status === 'Completed')).toEqual([]);
    } finally {
      release();
    }
    const done = await rig.waitForRun('the backfill run completed', (l) => mine(l) && l.status === 'Completed', 60_000);
    expect(done.records_completed).toBe(sent.length);
    const uuids: string[] = [];
    for (const key of await rig.s3.list('exports', 'catch-up/')) uuids.push(...jsonLines(await rig.s3.get('exports', key), true).map((l) => l.uuid as string));
    expect(uuids.sort()).toEqual(sent.map((e) => e.uuid).sort());
  });

  it('exports - a scheduled "every 5 minutes" run delivers what arrived in its interval to PostgreSQL; a late event lands in the next run; none twice', async () => {
    const clock = movableClock();
    rig = await startExportRig({ deps: { exportClock: clock } });
    const dest = await postgresDestination();
    const end = endIntervalIn(clock, 15_000);
    const record = await rig.putExport({ id: crypto.randomUUID(), interval: 'every 5 minutes', destination: { type: 'Postgres', config: { ...dest.config, exclude_events: ['ignored'] } } });
    const sent = [...eventsBetween(200, '2024-05-01T12:00:00Z', '2024-05-01T12:30:00Z'), capture(1, 'ignored', 'user-x')];
    await publishEvents(rig.js, sent);
    await waitForProcessed(rig.nc, sent.length);

    const startIso = new Date(end - 300_000).toISOString();
    const first = await rig.waitForRun('the scheduled run', (l) => l.exportId === record.id && !l.backfill_id && l.data_interval_start === startIso && l.status === 'Completed', 60_000);
    expect(first.records_completed).toBe(200);
    const cursor = JSON.parse(first.cursor!) as { first_seq: number; last_seq: number };
    expect(cursor.last_seq).toBeGreaterThanOrEqual(cursor.first_seq);
    // Every status on the way, in order.
    expect(rig.runs().filter((l) => l.data_interval_start === startIso).map((l) => l.status)).toEqual(['Starting', 'Running', 'Completed']);

    // An event stamped hours ago that arrives now is exported by the run during which it arrived.
    const late = capture(1, 'late', 'user-late', {}, { timestamp: '2024-05-01T09:00:00.000Z' });
    await publishEvents(rig.js, [late]);
    await waitForProcessed(rig.nc, sent.length + 1);
    // The next interval's end, on the clock, now comes 3 s from now: the run starts where the first ended.
    clock.offset = end + 300_000 - (Date.now() + 3_000);
    const second = await rig.waitForRun('the next scheduled run', (l) => !l.backfill_id && l.data_interval_start === new Date(end).toISOString() && l.status === 'Completed');
    expect(second.records_completed).toBe(1);
    expect(JSON.parse(second.cursor!).first_seq).toBe(cursor.last_seq + 1);
    // What /metrics shows of it: the runs, their records, and how far behind the export is (its last
    // completed interval ended ~3 s before now on the runner's clock; it is held by this worker).
    // (Counted just after the run's Completed line is sent: waited for.)
    let metrics = '';
    await waitFor('the second run counted', async () => {
      metrics = await rig!.worker.metrics.registry.metrics();
      return metricValue(metrics, 'spate_export_runs_total', { destination: 'Postgres', status: 'Completed' }) === 2;
    }, 5_000, 50);
    expect(metricValue(metrics, 'spate_export_records_total', { destination: 'Postgres' })).toBe(201);
    const lag = metricValue(metrics, 'spate_export_lag_seconds', { export_id: record.id });
    expect(lag).toBeGreaterThanOrEqual(0);
    expect(lag).toBeLessThan(300);

    const db = new pg.Client({ connectionString: dest.url });
    await db.connect();
    try {
      const { rows } = await db.query<{ uuid: string; n: number }>('SELECT uuid, count(*)::int AS n FROM exported_events GROUP BY uuid');
      expect(rows.filter((r) => r.n > 1)).toEqual([]);
      expect(rows.map((r) => r.uuid).sort()).toEqual([...sent.filter((e) => e.event !== 'ignored'), late].map((e) => e.uuid).sort());
      const row = (await db.query('SELECT * FROM exported_events WHERE uuid = $1', [late.uuid])).rows[0];
      expect(row).toMatchObject({ event: 'late', distinct_id: 'user-late', team_id: 1, properties: {} });
      expect((row.timestamp as Date).toISOString()).toBe('2024-05-01T09:00:00.000Z');
      const ledger = await db.query('SELECT run_id, records FROM spate_batch_export_runs ORDER BY data_interval_start');
      expect(ledger.rows.map((r) => Number(r.records))).toEqual([200, 1]);
    } finally {
      await db.end();
    }
  });

  it('exports - backfills and scheduled runs over the same events deliver each once; paused intervals are skipped; a deleted export is let go', async () => {
    const clock = movableClock();
    rig = await startExportRig({ deps: { exportClock: clock } });
    const end = endIntervalIn(clock, 12_000);
    const record = await rig.putExport({ id: crypto.randomUUID(), interval: 'every 5 minutes', destination: s3Destination(rig, { prefix: 'overlap' }) });
    const first = eventsBetween(100, '2024-05-01T12:00:00Z', '2024-05-01T13:00:00Z');
    await publishEvents(rig.js, first);
    await waitForProcessed(rig.nc, first.length);
    const mine = (l: { exportId: string }) => l.exportId === record.id;
    /** The records of a backfill of the hour: its 12 five-minute runs, once all completed. */
    const backfilled = async (id: string) => {
      const done = () => rig!.runs().filter((l) => l.backfill_id === id && l.status === 'Completed');
      await waitFor(`backfill ${id}`, () => new Set(done().map((l) => l.data_interval_start)).size === 12, 30_000, 50);
      return done().reduce((n, l) => n + (l.records_completed ?? 0), 0);
    };
    const scheduled1 = await rig.waitForRun('the first scheduled run', (l) => mine(l) && !l.backfill_id && l.status === 'Completed');
    expect(scheduled1.records_completed).toBe(100);

    // The hour's backfill: everything in it arrived in the completed scheduled run.
    const b1 = await rig.backfill(record, '2024-05-01T12:00:00.000Z', '2024-05-01T13:00:00.000Z');
    expect(await backfilled(b1)).toBe(0);

    // More events of that hour arrive; a backfill takes them before the next scheduled run does.
    const more = eventsBetween(50, '2024-05-01T12:00:00Z', '2024-05-01T13:00:00Z');
    await publishEvents(rig.js, more);
    await waitForProcessed(rig.nc, first.length + more.length);
    const b2 = await rig.backfill(record, '2024-05-01T12:00:00.000Z', '2024-05-01T13:00:00.000Z');
    expect(await backfilled(b2)).toBe(50);
    clock.offset = end + 300_000 - (Date.now() + 2_000);
    const scheduled2 = await rig.waitForRun('the second scheduled run', (l) => mine(l) && !l.backfill_id && l.data_interval_start === new Date(end).toISOString() && l.status === 'Completed');
    expect(scheduled2.records_completed).toBe(0);

    const uuids: string[] = [];
    for (const key of await rig.s3.list('exports', 'overlap/')) uuids.push(...jsonLines(await rig.s3.get('exports', key), true).map((l) => l.uuid as string));
    expect(uuids.sort()).toEqual([...first, ...more].map((e) => e.uuid).sort());

    // Paused: the next interval falls due and is skipped, not run.
    await rig.putExport({ ...record, paused: true });
    clock.offset = end + 600_000 - (Date.now() + 1_000);
    await waitFor('the skip logged', () => rig!.logs().some((l) => mine(l) && l.message.startsWith('Skipped 1 interval(s)')), 15_000, 50);
    expect(rig.runs().filter((l) => mine(l) && l.data_interval_start === new Date(end + 300_000).toISOString())).toEqual([]);

    await rig.deleteExport(record.id);
    await waitFor('the export let go', () => !rig!.worker.heldExports().includes(record.id), 10_000, 50);
  });

  it('exports - a scheduled persons run delivers the persons changed in its interval, merged by distinct id into PostgreSQL', async () => {
    const clock = movableClock();
    rig = await startExportRig({ deps: { exportClock: clock } });
    const dest = await postgresDestination();
    endIntervalIn(clock, 15_000);
    const record = await rig.putExport({ id: crypto.randomUUID(), model: 'persons', interval: 'every 5 minutes', destination: { type: 'Postgres', config: { ...dest.config, table_name: 'people' } } });
    const sent = [capture(1, '$identify', 'p-1', { $set: { tier: 'gold' } }), capture(1, '$identify', 'p-2', { $set: { tier: 'silver' } })];
    await publishEvents(rig.js, sent);
    await waitForProcessed(rig.nc, sent.length);
    const done = await rig.waitForRun('the scheduled persons run', (l) => l.exportId === record.id && !l.backfill_id && l.status === 'Completed', 60_000);
    expect(done.records_completed).toBe(2);
    const db = new pg.Client({ connectionString: dest.url });
    await db.connect();
    try {
      const { rows } = await db.query<{ distinct_id: string; tier: string; person_version: string }>(
        `SELECT distinct_id, properties->>'tier' AS tier, person_version FROM people ORDER BY distinct_id`,
      );
      expect(rows.map((r) => [r.distinct_id, r.tier])).toEqual([
        ['p-1', 'gold'],
        ['p-2', 'silver'],
      ]);
    } finally {
      await db.end();
    }
  });

  it('exports - a worker started with WORKER_EXPORTS=false takes no export; the others hold them all, spread between them', async () => {
    rig = await startExportRig();
    const off = await rig.startWorker({ WORKER_EXPORTS: 'false' });
    const second = await rig.startWorker();
    const ids: string[] = [];
    for (let i = 0; i < 8; i++) ids.push((await rig.putExport({ id: crypto.randomUUID(), paused: true, destination: { type: 'NoOp', config: {} } })).id);
    await waitFor('every export held once, by the workers that run exports', () => {
      const held = [...rig!.worker.heldExports(), ...second.heldExports()];
      return held.length === ids.length && new Set(held).size === ids.length;
    }, 20_000, 100);
    expect(off.heldExports()).toEqual([]);
    expect(rig.worker.heldExports().length).toBeGreaterThan(0);
    expect(second.heldExports().length).toBeGreaterThan(0);
    // The worker without exports still processes its share of the shards.
    expect(off.ownedShards().length).toBeGreaterThan(0);
  });
});

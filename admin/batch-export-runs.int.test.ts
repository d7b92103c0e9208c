// Backfills, runs and run logs: what the API records and what goes over NATS to and from the
// export runner (BATCH_EXPORT_BACKFILLS out; BATCH_EXPORT_RUNS and BATCH_EXPORT_LOGS in).
import { AckPolicy, jetstream, jetstreamManager, type JsMsg } from '@nats-io/jetstream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Kvm } from '@nats-io/kv';
import { BATCH_EXPORTS_BUCKET, pipelineSubject, toNdjson, type BatchExportBackfillRequest } from '../lib/index.js';
import { newBatchExport } from '../test/admin/endpoints.js';
import { startAdminFixture, type AdminFixture, type TestUser } from '../test/admin/harness.js';
import { waitFor } from '../test/kit/index.js';

let f: AdminFixture;
let owner: TestUser;
let base: string;

beforeAll(async () => {
  f = await startAdminFixture({ BACKFILL_MAX_RUNS: '1000' });
  owner = await f.newUser('owner@runs.example');
  base = `/api/organizations/${owner.organizationId}/batch_exports/`;
});
afterAll(async () => f?.stop());

const validation = (detail: string, attr: string | null) => ({ type: 'validation_error', code: 'validation_error', detail, attr });

async function backfill(exportId: string, body: unknown) {
  return f.api('POST', `${base}${exportId}/backfill/`, { key: owner.key, body });
}

async function latest(exportId: string) {
  return (await f.api('GET', `${base}${exportId}/`, { key: owner.key })).body.latest_runs as Array<Record<string, unknown>>;
}

/** Every message on BATCH_EXPORT_BACKFILLS so far (an ephemeral consumer from the start). */
async function backfillRequests(): Promise<Array<{ subject: string; msgId: string | undefined; request: BatchExportBackfillRequest }>> {
  const jsm = await jetstreamManager(f.nc);
  const info = await jsm.consumers.add('BATCH_EXPORT_BACKFILLS', { ack_policy: AckPolicy.None, inactive_threshold: 30_000_000_000 });
  const consumer = await jetstream(f.nc).consumers.get('BATCH_EXPORT_BACKFILLS', info.name);
  const pending = info.num_pending;
  const out: Array<{ subject: string; msgId: string | undefined; request: BatchExportBackfillRequest }> = [];
  if (pending === 0) return out;
  const messages = await consumer.fetch({ max_messages: pending, expires: 2_000 });
  for await (const m of messages as AsyncIterable<JsMsg>) {
    out.push({ subject: m.subject, msgId: m.headers?.get('Nats-Msg-Id'), request: m.json<BatchExportBackfillRequest>() });
  }
  return out;
}

async function publishRuns(teamId: number, exportId: string, lines: unknown[]): Promise<void> {
  await jetstream(f.nc).publish(pipelineSubject('batchExportRuns', teamId, exportId), toNdjson(lines));
}

describe('batch export backfills and runs', () => {
  it('backfill - validation of start_at and end_at, worded as PostHog words it', async () => {
    const exp = await newBatchExport(f, owner);
    const future = new Date(Date.UTC(2999, 0, 1));
    const cases: Array<[unknown, ReturnType<typeof validation>]> = [
      [{}, validation("Both 'start_at' and 'end_at' must be specified", null)],
      [{ start_at: '2024-01-01T00:00:00Z' }, validation("Both 'start_at' and 'end_at' must be specified", null)],
      [{ start_at: null, end_at: '2024-01-01T00:00:00Z' }, validation("Both 'start_at' and 'end_at' must be specified", null)],
      [{ start_at: 'yesterday', end_at: '2024-01-01T00:00:00Z' }, validation('Input yesterday is not a valid ISO formatted datetime.', 'start_at')],
      [{ start_at: '2024-02-30T00:00:00Z', end_at: '2024-03-05T00:00:00Z' }, validation('Input 2024-02-30T00:00:00Z is not a valid ISO formatted datetime.', 'start_at')],
      [{ start_at: 5, end_at: '2024-01-01T00:00:00Z' }, validation('Input 5 is not a valid ISO formatted datetime.', 'start_at')],
      [{ start_at: '2024-01-01T00:00:00', end_at: '2024-01-02T00:00:00Z' }, validation('Input 2024-01-01T00:00:00 is naive.', 'start_at')],
      [{ start_at: '2024-01-01T00:00:00Z', end_at: '2024-01-02' }, validation('Input 2024-01-02 is naive.', 'end_at')],
      [{ start_at: '2024-01-02T00:00:00Z', end_at: '2024-01-01T00:00:00Z' }, validation("The initial backfill datetime 'start_at' happens after 'end_at'", null)],
      [{ start_at: '2024-01-01T00:00:00Z', end_at: '2024-01-01T00:00:00+00:00' }, validation("The initial backfill datetime 'start_at' happens after 'end_at'", null)],
      [{ start_at: '2024-01-01T00:00:00Z', end_at: future.toISOString() }, validation("The provided 'end_at' (2999-01-01T00:00:00+00:00) is in the future", 'end_at')],
      [{ start_at: '2024-01-01T00:00:00Z', end_at: '2024-03-01T00:00:00Z' }, validation("A backfill may cover at most 1000 intervals of 'hour'; this one covers 1440. Split it into smaller ranges.", null)],
      [[1], validation('Invalid data. Expected a dictionary, but got list.', null)],
    ];
    for (const [body, expected] of cases) {
      const res = await backfill(exp.id, body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body, JSON.stringify(body)).toEqual(expected);
    }
    expect((await f.db.query('select count(*)::int as n from batch_export_backfills where batch_export_id = $1', [exp.id])).rows[0].n).toBe(0);
    expect(await latest(exp.id)).toEqual([]);
  });

  it('backfill - records one Starting run per interval (the last one cut at end_at); latest_runs shows the newest ten', async () => {
    const exp = await newBatchExport(f, owner);
    const res = await backfill(exp.id, { start_at: '2024-01-01T00:00:00+01:00', end_at: '2024-01-01T11:30:00Z' });
    expect(res.status, res.text).toBe(200);
    expect(res.text).toBe('');
    const runs = (await f.db.query('select * from batch_export_runs where batch_export_id = $1 order by data_interval_start', [exp.id])).rows;
    expect(runs).toHaveLength(13);
    expect(runs[0].data_interval_start.toISOString()).toBe('2023-12-31T23:00:00.000Z');
    expect(runs[0].data_interval_end.toISOString()).toBe('2024-01-01T00:00:00.000Z');
    expect(runs.at(-1).data_interval_start.toISOString()).toBe('2024-01-01T11:00:00.000Z');
    expect(runs.at(-1).data_interval_end.toISOString()).toBe('2024-01-01T11:30:00.000Z');
    expect(new Set(runs.map((r) => r.status))).toEqual(new Set(['Starting']));

    const shown = await latest(exp.id);
    expect(shown).toHaveLength(10);
    expect(shown[0]).toMatchObject({
      status: 'Starting',
      data_interval_start: '2024-01-01T11:00:00.000Z',
      data_interval_end: '2024-01-01T11:30:00.000Z',
      batch_export: exp.id,
      records_completed: null,
      latest_error: null,
      finished_at: null,
      cursor: null,
      records_total_count: null,
    });
    expect(shown.map((r) => r.data_interval_start)).toEqual(runs.slice(3).reverse().map((r) => r.data_interval_start.toISOString()));
  });

  it('backfill - the request reaches the runner on BATCH_EXPORT_BACKFILLS once, with a Nats-Msg-Id', async () => {
    const exp = await newBatchExport(f, owner, { interval: 'day' });
    expect((await backfill(exp.id, { start_at: '2024-01-01T00:00:00Z', end_at: '2024-01-04T12:00:00Z' })).status).toBe(200);
    const { rows } = await f.db.query('select id from batch_export_backfills where batch_export_id = $1', [exp.id]);
    const mine = (await backfillRequests()).filter((m) => m.request.batch_export_id === exp.id);
    expect(mine).toEqual([
      {
        subject: `batch_export_backfills.${owner.projectId}.${exp.id}`,
        msgId: `backfill:${rows[0].id}`,
        request: {
          id: rows[0].id,
          batch_export_id: exp.id,
          team_id: owner.projectId,
          start_at: '2024-01-01T00:00:00.000Z',
          end_at: '2024-01-04T12:00:00.000Z',
          interval: 'day',
          interval_seconds: 86_400,
          total_runs: 4,
          created_at: expect.any(String),
        },
      },
    ]);
    expect((await f.db.query('select count(*)::int as n from nats_outbox')).rows[0].n).toBe(0);
  });

  it('runs - updates from the runner on BATCH_EXPORT_RUNS show in latest_runs, in order, never moving back', async () => {
    const exp = await newBatchExport(f, owner);
    const interval = { data_interval_start: '2024-05-01T10:00:00Z', data_interval_end: '2024-05-01T11:00:00Z' };
    await publishRuns(owner.projectId, exp.id, [{ ...interval, status: 'Starting', updated_at: '2024-05-01T11:00:01Z' }]);
    await waitFor('run recorded', async () => (await latest(exp.id)).length === 1, 5_000);
    await publishRuns(owner.projectId, exp.id, [
      { ...interval, status: 'Running', records_total_count: 100, updated_at: '2024-05-01T11:00:02Z' },
      { ...interval, status: 'Completed', records_completed: 100, updated_at: '2024-05-01T11:00:05Z' },
    ]);
    await waitFor('run completed', async () => (await latest(exp.id))[0]?.status === 'Completed', 5_000);
    // A late, older line (redelivery) does not move the run back.
    await publishRuns(owner.projectId, exp.id, [{ ...interval, status: 'Running', updated_at: '2024-05-01T11:00:03Z' }]);
    const next = { data_interval_start: '2024-05-01T11:00:00Z', data_interval_end: '2024-05-01T12:00:00Z' };
    await publishRuns(owner.projectId, exp.id, [{ ...next, status: 'FailedRetryable', latest_error: 'S3 said no', updated_at: '2024-05-01T12:00:01Z' }]);
    await waitFor('second run', async () => (await latest(exp.id)).length === 2, 5_000);
    const shown = await latest(exp.id);
    expect(shown[1]).toMatchObject({
      status: 'Completed',
      records_completed: 100,
      records_total_count: 100,
      data_interval_start: '2024-05-01T10:00:00.000Z',
      last_updated_at: '2024-05-01T11:00:05.000Z',
      finished_at: '2024-05-01T11:00:05.000Z',
    });
    expect(shown[0]).toMatchObject({ status: 'FailedRetryable', latest_error: 'S3 said no', finished_at: null });
    expect((await f.db.query('select count(*)::int as n from batch_export_runs where batch_export_id = $1', [exp.id])).rows[0].n).toBe(2);
  });

  it('runs - a Failed run line with pause_export pauses the export, records why, and reaches the KV record; an unpause made later wins', async () => {
    const exp = await newBatchExport(f, owner);
    const interval = { data_interval_start: '2024-05-01T10:00:00Z', data_interval_end: '2024-05-01T11:00:00Z' };
    const reason = '2 of the last 2 scheduled runs failed (limit 2 of 50)';
    await publishRuns(owner.projectId, exp.id, [{ ...interval, status: 'Failed', latest_error: 'NoSuchBucket on bucket b', pause_export: reason, updated_at: new Date().toISOString() }]);
    await waitFor('export paused', async () => (await f.api('GET', `${base}${exp.id}/`, { key: owner.key })).body.paused === true, 5_000);
    const shown = (await f.api('GET', `${base}${exp.id}/`, { key: owner.key })).body;
    expect(shown.last_paused_at).not.toBeNull();
    expect(shown.latest_runs[0]).toMatchObject({ status: 'Failed', latest_error: 'NoSuchBucket on bucket b' });
    const activity = await f.db.query(`select activity, user_id, detail from activity_log where item_id = $1 and activity = 'paused'`, [exp.id]);
    expect(activity.rows).toEqual([{ activity: 'paused', user_id: null, detail: expect.objectContaining({ reason, by: 'batch export runner' }) }]);
    const kv = await new Kvm(f.nc).open(BATCH_EXPORTS_BUCKET);
    await waitFor('the KV record paused', async () => (await kv.get(exp.id))?.json<{ paused: boolean }>().paused === true, 5_000, 50);

    // Unpaused by a person afterwards: an older line asking to pause changes nothing.
    expect((await f.api('POST', `${base}${exp.id}/unpause/`, { key: owner.key })).status).toBe(200);
    await publishRuns(owner.projectId, exp.id, [{ ...interval, data_interval_start: '2024-05-01T09:00:00Z', status: 'Failed', pause_export: reason, updated_at: '2024-05-01T11:00:05Z' }]);
    await waitFor('the older run stored', async () => (await latest(exp.id)).length === 2, 5_000);
    expect((await f.api('GET', `${base}${exp.id}/`, { key: owner.key })).body.paused).toBe(false);
  });

  it('runs - every status is accepted; latest_runs is the newest ten of many', async () => {
    const exp = await newBatchExport(f, owner);
    const statuses = ['Starting', 'Running', 'Completed', 'Failed', 'FailedRetryable', 'Cancelled', 'TimedOut', 'Terminated'];
    const lines = Array.from({ length: 16 }, (_, i) => ({
      data_interval_start: new Date(Date.UTC(2024, 0, 1, i)).toISOString(),
      data_interval_end: new Date(Date.UTC(2024, 0, 1, i + 1)).toISOString(),
      status: statuses[i % statuses.length],
    }));
    // Runs created one after another: created_at orders them.
    for (const line of lines) await publishRuns(owner.projectId, exp.id, [line]);
    await waitFor('16 runs', async () => (await f.db.query('select count(*)::int as n from batch_export_runs where batch_export_id = $1', [exp.id])).rows[0].n === 16, 5_000);
    const shown = await latest(exp.id);
    expect(shown).toHaveLength(10);
    expect(shown.map((r) => r.status)).toEqual(lines.slice(6).reverse().map((l) => l.status));
  });

  it('runs - backfill runs are matched by interval and the backfill status follows them', async () => {
    const exp = await newBatchExport(f, owner);
    await backfill(exp.id, { start_at: '2024-01-01T00:00:00Z', end_at: '2024-01-01T02:00:00Z' });
    const { rows } = await f.db.query('select id from batch_export_backfills where batch_export_id = $1', [exp.id]);
    const backfillId = rows[0].id as string;
    const status = async () => (await f.db.query('select status, finished_at from batch_export_backfills where id = $1', [backfillId])).rows[0];
    const first = { backfill_id: backfillId, data_interval_start: '2024-01-01T00:00:00Z', data_interval_end: '2024-01-01T01:00:00Z' };
    const second = { backfill_id: backfillId, data_interval_start: '2024-01-01T01:00:00Z', data_interval_end: '2024-01-01T02:00:00Z' };
    await publishRuns(owner.projectId, exp.id, [{ ...first, status: 'Running' }]);
    await waitFor('backfill running', async () => (await status()).status === 'Running', 5_000);
    await publishRuns(owner.projectId, exp.id, [{ ...first, status: 'Completed' }, { ...second, status: 'Completed', records_completed: 7 }]);
    await waitFor('backfill completed', async () => (await status()).status === 'Completed', 5_000);
    expect((await status()).finished_at).not.toBeNull();
    expect((await f.db.query('select count(*)::int as n from batch_export_runs where backfill_id = $1', [backfillId])).rows[0].n).toBe(2);
  });

  it('runs - invalid lines and lines for unknown exports are dropped; the rest of the message is stored', async () => {
    const exp = await newBatchExport(f, owner);
    const other = await f.newUser('other@runs.example');
    await publishRuns(owner.projectId, exp.id, [
      { data_interval_end: '2024-06-01T00:00:00Z', status: 'Exploded' },
      { data_interval_end: 'not a time', status: 'Completed' },
      { status: 'Completed' },
      { data_interval_end: '2024-06-01T00:00:00Z', status: 'Completed', records_completed: -1 },
      { data_interval_end: '2024-06-01T01:00:00Z', status: 'Completed', backfill_id: '00000000-0000-0000-0000-000000000000' },
      { data_interval_end: '2024-06-01T02:00:00Z', status: 'Completed' },
    ]);
    // Wrong team for the export, a malformed export id: nothing.
    await publishRuns(other.projectId, exp.id, [{ data_interval_end: '2024-06-01T03:00:00Z', status: 'Completed' }]);
    await jetstream(f.nc).publish(`batch_export_runs.${owner.projectId}.not-a-uuid`, toNdjson([{ data_interval_end: '2024-06-01T04:00:00Z', status: 'Completed' }]));
    await waitFor('valid line stored', async () => (await latest(exp.id)).length > 0, 5_000);
    await new Promise((r) => setTimeout(r, 300));
    const shown = await latest(exp.id);
    expect(shown.map((r) => [r.data_interval_start, r.data_interval_end])).toEqual([[null, '2024-06-01T02:00:00.000Z']]);
    const metrics = await f.api('GET', '/metrics');
    expect(metrics.text).toMatch(/spate_admin_stream_lines_total\{[^}]*sink="batch_export_runs"[^}]*outcome="invalid"[^}]*\} [1-9]/);
  });

  it('logs - runner log entries on BATCH_EXPORT_LOGS are stored once (ids make redelivery harmless)', async () => {
    const exp = await newBatchExport(f, owner);
    const subject = pipelineSubject('batchExportLogs', owner.projectId, exp.id);
    const entry = { id: '0190f3c4-0000-7000-8000-000000000001', level: 'ERROR', message: 'Could not connect', timestamp: '2024-01-01T00:00:00Z' };
    await jetstream(f.nc).publish(subject, toNdjson([entry, { message: 'no id, defaults' }, { level: 'LOUD', message: 'bad level' }]));
    await jetstream(f.nc).publish(subject, toNdjson([entry]));
    const count = async () => (await f.db.query('select count(*)::int as n from batch_export_log_entries where batch_export_id = $1', [exp.id])).rows[0].n;
    await waitFor('two entries', async () => (await count()) === 2, 5_000);
    await new Promise((r) => setTimeout(r, 300));
    expect(await count()).toBe(2);
    const rows = (await f.db.query('select level, message, team_id from batch_export_log_entries where batch_export_id = $1 order by message', [exp.id])).rows;
    expect(rows).toEqual([
      { level: 'ERROR', message: 'Could not connect', team_id: owner.projectId },
      { level: 'INFO', message: 'no id, defaults', team_id: owner.projectId },
    ]);
    // The logs endpoint still answers as the interface says.
    expect((await f.api('GET', `${base}${exp.id}/logs/`, { key: owner.key })).text).toBe('');
  });
});

// What the export runner reports: run states on BATCH_EXPORT_RUNS (subject
// batch_export_runs.<teamId>.<batchExportId>, lines as BatchExportRunLine) → batch_export_runs,
// and log entries on BATCH_EXPORT_LOGS (batch_export_logs.<teamId>.<batchExportId>, lines as
// BatchExportLogLine) → batch_export_log_entries.
import type { JsMsg } from '@nats-io/jetstream';
import {
  BATCH_EXPORT_LOG_LEVELS,
  BATCH_EXPORT_RUN_STATUSES,
  cleanString,
  parsePipelineSubject,
  PIPELINE_STREAMS,
  TERMINAL_RUN_STATUSES,
} from '../../lib/index.js';
import { inTransaction, type Pool } from '../db/pool.js';
import { derivedId, isUuidText, parseLines, parseTimestamp } from './lines.js';
import { insertSkippingBadRows } from './plugin-logs.js';
import type { Sink } from './stream-ingester.js';

const streamTime = (msg: JsMsg) => msg.time;

function subjectOf(stream: 'batchExportRuns' | 'batchExportLogs', msg: JsMsg): { teamId: number; exportId: string } | undefined {
  const subject = parsePipelineSubject(stream, msg.subject);
  return subject && isUuidText(subject.id) ? { teamId: subject.teamId, exportId: subject.id.toLowerCase() } : undefined;
}

// --- runs ---------------------------------------------------------------------------------------

export interface RunUpdateRow {
  team_id: number;
  batch_export_id: string;
  backfill_id: string | null;
  data_interval_start: Date | null;
  data_interval_end: Date;
  status: string;
  records_completed: number | null;
  records_total_count: number | null;
  latest_error: string | null;
  cursor: string | null;
  finished_at: Date | null;
  updated_at: Date;
  /** The runner asks to pause the export (repeated failures), with the reason. */
  pause_export: string | null;
}

const STATUSES = new Set<string>(BATCH_EXPORT_RUN_STATUSES);
const MAX_INT = 2_147_483_647;

const optionalCount = (v: unknown): number | null | undefined =>
  v === undefined || v === null ? null : typeof v === 'number' && Number.isInteger(v) && v >= 0 && v <= MAX_INT ? v : undefined;
const optionalText = (v: unknown): string | null | undefined => (v === undefined || v === null ? null : typeof v === 'string' ? cleanString(v) : undefined);
const optionalTime = (v: unknown): Date | null | undefined => (v === undefined || v === null ? null : parseTimestamp(v));

export function parseRunMessage(msg: JsMsg): { rows: RunUpdateRow[]; invalid: number } {
  const subject = subjectOf('batchExportRuns', msg);
  const lines = parseLines(msg.data);
  if (!subject) return { rows: [], invalid: lines.length };
  const rows: RunUpdateRow[] = [];
  let invalid = 0;
  for (const line of lines) {
    const row = line && {
      team_id: subject.teamId,
      batch_export_id: subject.exportId,
      backfill_id: line.backfill_id === undefined || line.backfill_id === null ? null : isUuidText(line.backfill_id) ? line.backfill_id : undefined,
      data_interval_start: optionalTime(line.data_interval_start),
      data_interval_end: parseTimestamp(line.data_interval_end),
      status: typeof line.status === 'string' && STATUSES.has(line.status) ? line.status : undefined,
      records_completed: optionalCount(line.records_completed),
      records_total_count: optionalCount(line.records_total_count),
      latest_error: optionalText(line.latest_error),
      cursor: optionalText(line.cursor),
      finished_at: optionalTime(line.finished_at),
      updated_at: line.updated_at === undefined ? streamTime(msg) : parseTimestamp(line.updated_at),
      pause_export: optionalText(line.pause_export),
    };
    if (!row || Object.values(row).some((v) => v === undefined)) {
      invalid++;
      continue;
    }
    rows.push(row as RunUpdateRow);
  }
  return { rows, invalid };
}

const runKey = (r: RunUpdateRow) =>
  `${r.batch_export_id}|${r.backfill_id ?? ''}|${r.data_interval_start?.getTime() ?? ''}|${r.data_interval_end.getTime()}`;

const TERMINAL = `array[${TERMINAL_RUN_STATUSES.map((s) => `'${s}'`).join(', ')}]`;

const UPSERT_RUNS = `
  insert into batch_export_runs as r (batch_export_id, backfill_id, status, records_completed, records_total_count,
    latest_error, data_interval_start, data_interval_end, cursor, finished_at, created_at, last_updated_at)
  select v.export_id, v.backfill_id, v.status, v.records_completed, v.records_total_count, v.latest_error, v.start, v.end_,
    v.cursor, coalesce(v.finished_at, case when v.status = any(${TERMINAL}) then v.updated_at end), v.updated_at, v.updated_at
  from unnest($1::uuid[], $2::int[], $3::uuid[], $4::text[], $5::int[], $6::int[], $7::text[], $8::timestamptz[],
      $9::timestamptz[], $10::text[], $11::timestamptz[], $12::timestamptz[])
    as v(export_id, team_id, backfill_id, status, records_completed, records_total_count, latest_error, start, end_, cursor,
      finished_at, updated_at)
  join batch_exports e on e.id = v.export_id and e.team_id = v.team_id
  where v.backfill_id is null
    or exists (select 1 from batch_export_backfills b where b.id = v.backfill_id and b.batch_export_id = v.export_id)
  on conflict (batch_export_id, backfill_id, data_interval_start, data_interval_end) do update set
    status = excluded.status,
    records_completed = coalesce(excluded.records_completed, r.records_completed),
    records_total_count = coalesce(excluded.records_total_count, r.records_total_count),
    latest_error = coalesce(excluded.latest_error, r.latest_error),
    cursor = coalesce(excluded.cursor, r.cursor),
    finished_at = coalesce(excluded.finished_at, r.finished_at),
    last_updated_at = excluded.last_updated_at
  where r.last_updated_at <= excluded.last_updated_at
  returning r.backfill_id`;

/** A backfill's status follows its runs. */
const BACKFILL_STATUS = `
  update batch_export_backfills b set
    status = s.status,
    finished_at = case when s.status = any(${TERMINAL}) then coalesce(b.finished_at, clock_timestamp()) end,
    last_updated_at = clock_timestamp()
  from (
    select backfill_id, case
      when bool_and(status = 'Completed') then 'Completed'
      when bool_and(status = any(${TERMINAL})) then
        case when bool_or(status in ('Failed', 'TimedOut', 'Terminated')) then 'Failed' else 'Cancelled' end
      when bool_and(status = 'Starting') then 'Starting'
      else 'Running' end as status
    from batch_export_runs where backfill_id = any($1::uuid[]) group by backfill_id) s
  where b.id = s.backfill_id and b.status is distinct from s.status`;

/**
 * A run line with `pause_export` (the runner's auto-pause after repeated failures): the admin
 * server, the only writer of admin state, pauses the export as the API's pause does, unless it
 * changed after the line was written (a person unpausing it since wins), and records the reason
 * in the activity log. The KV record follows through the table's trigger.
 */
const PAUSE_EXPORTS = `
  with paused as (
    update batch_exports e set paused = true, last_paused_at = clock_timestamp(), last_updated_at = clock_timestamp()
    from unnest($1::uuid[], $2::int[], $3::text[], $4::timestamptz[]) as v(id, team_id, reason, updated_at)
    where e.id = v.id and e.team_id = v.team_id and not e.paused and not e.deleted and e.last_updated_at < v.updated_at
    returning e.id, e.team_id, e.name, v.reason)
  insert into activity_log (organization_id, team_id, user_id, scope, item_id, activity, detail)
  select p.organization_id, paused.team_id, null, 'BatchExport', paused.id::text, 'paused',
    jsonb_build_object('name', paused.name, 'changes', '[]'::jsonb, 'reason', paused.reason, 'by', 'batch export runner')
  from paused join projects p on p.id = paused.team_id`;

async function upsertRuns(pool: Pool, input: RunUpdateRow[]): Promise<number> {
  // One statement may not update a row twice: fold the lines of each run into one, as applying
  // them one by one would (the newest status; each other field from the newest line that has it).
  const folded = new Map<string, RunUpdateRow>();
  const byTime = [...input].sort((a, b) => a.updated_at.getTime() - b.updated_at.getTime());
  for (const r of byTime) {
    const key = runKey(r);
    const seen = folded.get(key);
    folded.set(
      key,
      seen
        ? {
            ...r,
            records_completed: r.records_completed ?? seen.records_completed,
            records_total_count: r.records_total_count ?? seen.records_total_count,
            latest_error: r.latest_error ?? seen.latest_error,
            cursor: r.cursor ?? seen.cursor,
            finished_at: r.finished_at ?? seen.finished_at,
            pause_export: r.pause_export ?? seen.pause_export,
          }
        : r,
    );
  }
  const rows = [...folded.values()];
  return inTransaction(pool, async (db) => {
    const result = await db.query<{ backfill_id: string | null }>(UPSERT_RUNS, [
      rows.map((r) => r.batch_export_id),
      rows.map((r) => r.team_id),
      rows.map((r) => r.backfill_id),
      rows.map((r) => r.status),
      rows.map((r) => r.records_completed),
      rows.map((r) => r.records_total_count),
      rows.map((r) => r.latest_error),
      rows.map((r) => r.data_interval_start),
      rows.map((r) => r.data_interval_end),
      rows.map((r) => r.cursor),
      rows.map((r) => r.finished_at),
      rows.map((r) => r.updated_at),
    ]);
    const backfills = [...new Set(result.rows.map((r) => r.backfill_id).filter((id): id is string => id !== null))];
    if (backfills.length > 0) await db.query(BACKFILL_STATUS, [backfills]);
    const pauses = rows.filter((r) => r.pause_export !== null);
    if (pauses.length > 0) {
      await db.query(PAUSE_EXPORTS, [pauses.map((r) => r.batch_export_id), pauses.map((r) => r.team_id), pauses.map((r) => r.pause_export), pauses.map((r) => r.updated_at)]);
    }
    // Lines merged into a newer one of the same batch count as applied.
    return (result.rowCount ?? 0) + (input.length - rows.length);
  });
}

export const batchExportRunsSink: Sink<RunUpdateRow> = {
  name: 'batch_export_runs',
  stream: PIPELINE_STREAMS.batchExportRuns.name,
  durable: 'spate-admin-batch-export-runs',
  parse: parseRunMessage,
  write: (pool, rows) => insertSkippingBadRows(pool, rows, upsertRuns),
};

// --- logs ---------------------------------------------------------------------------------------

export interface BatchExportLogRow {
  id: string;
  team_id: number;
  batch_export_id: string;
  run_id: string | null;
  timestamp: Date;
  level: string;
  message: string;
  instance_id: string | null;
}

const LEVELS = new Set<string>(BATCH_EXPORT_LOG_LEVELS);
const LOG_STREAM = PIPELINE_STREAMS.batchExportLogs.name;

export function parseBatchExportLogMessage(msg: JsMsg): { rows: BatchExportLogRow[]; invalid: number } {
  const subject = subjectOf('batchExportLogs', msg);
  const lines = parseLines(msg.data);
  if (!subject) return { rows: [], invalid: lines.length };
  const rows: BatchExportLogRow[] = [];
  let invalid = 0;
  lines.forEach((line, i) => {
    const timestamp = line?.timestamp === undefined ? streamTime(msg) : parseTimestamp(line.timestamp);
    const level = line?.level ?? 'INFO';
    const runId = line?.run_id ?? null;
    const instance = line?.instance_id ?? null;
    if (
      !line ||
      typeof line.message !== 'string' ||
      !timestamp ||
      typeof level !== 'string' ||
      !LEVELS.has(level) ||
      (line.id !== undefined && !isUuidText(line.id)) ||
      (runId !== null && !isUuidText(runId)) ||
      (instance !== null && typeof instance !== 'string')
    ) {
      invalid++;
      return;
    }
    rows.push({
      id: (line.id) ?? derivedId(LOG_STREAM, msg.seq, i),
      team_id: subject.teamId,
      batch_export_id: subject.exportId,
      run_id: runId,
      timestamp,
      level,
      message: cleanString(line.message),
      instance_id: instance === null ? null : cleanString(instance),
    });
  });
  return { rows, invalid };
}

const INSERT_LOGS = `
  insert into batch_export_log_entries (id, team_id, batch_export_id, run_id, timestamp, level, message, instance_id)
  select v.id, v.team_id, v.export_id, v.run_id, v.ts, v.level, v.message, v.instance_id
  from unnest($1::uuid[], $2::int[], $3::uuid[], $4::uuid[], $5::timestamptz[], $6::text[], $7::text[], $8::text[])
    as v(id, team_id, export_id, run_id, ts, level, message, instance_id)
  join batch_exports e on e.id = v.export_id and e.team_id = v.team_id
  on conflict (id) do nothing`;

async function insertLogs(pool: Pool, rows: BatchExportLogRow[]): Promise<number> {
  const result = await pool.query(INSERT_LOGS, [
    rows.map((r) => r.id),
    rows.map((r) => r.team_id),
    rows.map((r) => r.batch_export_id),
    rows.map((r) => r.run_id),
    rows.map((r) => r.timestamp),
    rows.map((r) => r.level),
    rows.map((r) => r.message),
    rows.map((r) => r.instance_id),
  ]);
  return result.rowCount ?? 0;
}

export const batchExportLogsSink: Sink<BatchExportLogRow> = {
  name: 'batch_export_logs',
  stream: LOG_STREAM,
  durable: 'spate-admin-batch-export-logs',
  parse: parseBatchExportLogMessage,
  write: (pool, rows) => insertSkippingBadRows(pool, rows, insertLogs),
};

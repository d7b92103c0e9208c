// Batch exports of an organization's projects, their runs (newest ten shown as latest_runs) and
// backfills. Deleting is soft: the row stays (runs keep their history) but nothing shows it.
import {
  INTERVAL_SECONDS,
  TERMINAL_RUN_STATUSES,
  type BatchExportInterval,
  type BatchExportRecord,
} from '../../lib/index.js';
import { publicDestinationConfig } from '../batch-export-destinations.js';
import type { Queryable } from '../db/pool.js';

export interface BatchExportRow {
  id: string;
  team_id: number;
  name: string;
  model: 'events' | 'persons';
  destination_type: string;
  destination_config: Record<string, unknown>;
  interval: BatchExportInterval;
  paused: boolean;
  last_paused_at: Date | null;
  start_at: Date | null;
  end_at: Date | null;
  hogql_query: string | null;
  created_at: Date;
  last_updated_at: Date;
}

export interface RunRow {
  id: string;
  batch_export_id: string;
  status: string;
  records_completed: number | null;
  latest_error: string | null;
  data_interval_start: Date | null;
  data_interval_end: Date;
  cursor: string | null;
  created_at: Date;
  finished_at: Date | null;
  last_updated_at: Date;
  records_total_count: number | null;
}

const iso = (d: Date | null) => d?.toISOString() ?? null;

export function runJson(r: RunRow) {
  return {
    id: r.id,
    status: r.status,
    records_completed: r.records_completed,
    latest_error: r.latest_error,
    data_interval_start: iso(r.data_interval_start),
    data_interval_end: r.data_interval_end.toISOString(),
    cursor: r.cursor,
    created_at: r.created_at.toISOString(),
    finished_at: iso(r.finished_at),
    last_updated_at: r.last_updated_at.toISOString(),
    records_total_count: r.records_total_count,
    batch_export: r.batch_export_id,
  };
}

export function batchExportJson(e: BatchExportRow, runs: readonly RunRow[]) {
  return {
    id: e.id,
    team_id: e.team_id,
    name: e.name,
    model: e.model,
    destination: { type: e.destination_type, config: publicDestinationConfig(e.destination_type, e.destination_config) },
    interval: e.interval,
    paused: e.paused,
    created_at: e.created_at.toISOString(),
    last_updated_at: e.last_updated_at.toISOString(),
    last_paused_at: iso(e.last_paused_at),
    start_at: iso(e.start_at),
    end_at: iso(e.end_at),
    latest_runs: runs.map(runJson),
    hogql_query: e.hogql_query,
    // Spate stores hogql_query as given and does not derive a field schema from it.
    schema: null,
  };
}

/** What the export runner needs, as the KV bucket holds it (secrets included). */
export function batchExportRecord(e: BatchExportRow): BatchExportRecord {
  return {
    id: e.id,
    team_id: e.team_id,
    name: e.name,
    model: e.model,
    interval: e.interval,
    interval_seconds: INTERVAL_SECONDS[e.interval],
    paused: e.paused,
    start_at: iso(e.start_at),
    end_at: iso(e.end_at),
    hogql_query: e.hogql_query,
    destination: { type: e.destination_type, config: e.destination_config },
    last_updated_at: e.last_updated_at.toISOString(),
  };
}

const COLUMNS = `e.id, e.team_id, e.name, e.model, e.destination_type, e.destination_config, e."interval", e.paused,
  e.last_paused_at, e.start_at, e.end_at, e.hogql_query, e.created_at, e.last_updated_at`;

/** Exports of the organization's projects, not deleted. */
const IN_ORGANIZATION = `e.team_id in (select id from projects where organization_id = $1) and not e.deleted`;

export async function listBatchExports(
  db: Queryable,
  organizationId: string,
  page: { limit: number; offset: number },
): Promise<{ count: number; rows: BatchExportRow[] }> {
  const count = await db.query<{ count: string }>(`select count(*) from batch_exports e where ${IN_ORGANIZATION}`, [organizationId]);
  const { rows } = await db.query<BatchExportRow>(
    `select ${COLUMNS} from batch_exports e where ${IN_ORGANIZATION} order by e.created_at desc, e.id desc limit $2 offset $3`,
    [organizationId, page.limit, page.offset],
  );
  return { count: Number(count.rows[0]!.count), rows };
}

export async function findBatchExport(db: Queryable, organizationId: string, id: string, lock = false): Promise<BatchExportRow | undefined> {
  const { rows } = await db.query<BatchExportRow>(
    `select ${COLUMNS} from batch_exports e where ${IN_ORGANIZATION} and e.id = $2 ${lock ? 'for no key update' : ''}`,
    [organizationId, id],
  );
  return rows[0];
}

/** The newest ten runs of each export. */
export async function latestRuns(db: Queryable, exportIds: readonly string[]): Promise<Map<string, RunRow[]>> {
  const out = new Map<string, RunRow[]>(exportIds.map((id) => [id, []]));
  if (exportIds.length === 0) return out;
  const { rows } = await db.query<RunRow>(
    `select r.* from unnest($1::uuid[]) as x(id)
     cross join lateral (
       select id, batch_export_id, status, records_completed, latest_error, data_interval_start, data_interval_end,
         cursor, created_at, finished_at, last_updated_at, records_total_count
       from batch_export_runs where batch_export_id = x.id
       order by created_at desc, data_interval_start desc nulls last, id desc limit 10) r`,
    [exportIds],
  );
  for (const r of rows) out.get(r.batch_export_id)!.push(r);
  return out;
}

export interface BatchExportFields {
  name?: string;
  model?: 'events' | 'persons';
  destination_type?: string;
  destination_config?: Record<string, unknown>;
  interval?: BatchExportInterval;
  paused?: boolean;
  last_paused_at?: Date | null;
  start_at?: Date | null;
  end_at?: Date | null;
  hogql_query?: string | null;
}

const SETTABLE = [
  'name',
  'model',
  'destination_type',
  'destination_config',
  'interval',
  'paused',
  'last_paused_at',
  'start_at',
  'end_at',
  'hogql_query',
] as const;

function columnValue(column: (typeof SETTABLE)[number], fields: BatchExportFields): unknown {
  return column === 'destination_config' ? JSON.stringify(fields.destination_config) : fields[column];
}

export async function createBatchExport(
  db: Queryable,
  teamId: number,
  createdBy: number,
  fields: BatchExportFields & { name: string; destination_type: string; destination_config: Record<string, unknown>; interval: BatchExportInterval },
): Promise<BatchExportRow> {
  const columns = SETTABLE.filter((c) => fields[c] !== undefined);
  const values = columns.map((c) => columnValue(c, fields));
  const { rows } = await db.query<BatchExportRow>(
    `insert into batch_exports as e (team_id, created_by_id, ${columns.map((c) => `"${c}"`).join(', ')})
     values ($1, $2, ${columns.map((_, i) => `$${i + 3}`).join(', ')}) returning ${COLUMNS}`,
    [teamId, createdBy, ...values],
  );
  return rows[0]!;
}

export async function updateBatchExport(db: Queryable, id: string, fields: BatchExportFields): Promise<BatchExportRow> {
  const columns = SETTABLE.filter((c) => fields[c] !== undefined);
  const sets = columns.map((c, i) => `"${c}" = $${i + 2}`);
  const { rows } = await db.query<BatchExportRow>(
    `update batch_exports e set ${[...sets, 'last_updated_at = clock_timestamp()'].join(', ')} where e.id = $1 returning ${COLUMNS}`,
    [id, ...columns.map((c) => columnValue(c, fields))],
  );
  return rows[0]!;
}

/**
 * Pauses or unpauses; pausing an export that is already paused changes nothing (idempotent,
 * last_paused_at keeps the time of the pause that took effect).
 */
export async function setBatchExportPaused(db: Queryable, id: string, paused: boolean): Promise<{ row: BatchExportRow; changed: boolean }> {
  const { rows } = await db.query<BatchExportRow>(
    `update batch_exports e set paused = $2, last_updated_at = clock_timestamp(),
       last_paused_at = case when $2 then clock_timestamp() else e.last_paused_at end
     where e.id = $1 and e.paused is distinct from $2 returning ${COLUMNS}`,
    [id, paused],
  );
  if (rows[0]) return { row: rows[0], changed: true };
  const { rows: same } = await db.query<BatchExportRow>(`select ${COLUMNS} from batch_exports e where e.id = $1`, [id]);
  return { row: same[0]!, changed: false };
}

/** Soft delete: gone from the API and the runner's bucket; unfinished runs and backfills are cancelled. */
export async function deleteBatchExport(db: Queryable, id: string): Promise<void> {
  await db.query('update batch_exports set deleted = true, last_updated_at = clock_timestamp() where id = $1', [id]);
  const terminal = [...TERMINAL_RUN_STATUSES];
  await db.query(
    `update batch_export_runs set status = 'Cancelled', finished_at = clock_timestamp(), last_updated_at = clock_timestamp()
     where batch_export_id = $1 and status <> all($2::text[])`,
    [id, terminal],
  );
  await db.query(
    `update batch_export_backfills set status = 'Cancelled', finished_at = clock_timestamp(), last_updated_at = clock_timestamp()
     where batch_export_id = $1 and status <> all($2::text[])`,
    [id, terminal],
  );
}

export interface BackfillRow {
  id: string;
  batch_export_id: string;
  start_at: Date;
  end_at: Date;
  total_runs: number;
  created_at: Date;
}

/**
 * Records a backfill and its runs (status Starting), one per interval:
 * [start + k·step, min(start + (k+1)·step, end)). Steps are whole seconds, so days and weeks
 * are fixed lengths whatever the session time zone.
 */
export async function createBackfill(
  db: Queryable,
  exportId: string,
  start: Date,
  end: Date,
  stepSeconds: number,
  createdBy: number,
): Promise<BackfillRow> {
  const totalRuns = backfillRunCount(start, end, stepSeconds);
  const { rows } = await db.query<BackfillRow>(
    `insert into batch_export_backfills (batch_export_id, start_at, end_at, total_runs, created_by_id)
     values ($1, $2, $3, $4, $5) returning id, batch_export_id, start_at, end_at, total_runs, created_at`,
    [exportId, start, end, totalRuns, createdBy],
  );
  const backfill = rows[0]!;
  await db.query(
    `insert into batch_export_runs (batch_export_id, backfill_id, status, data_interval_start, data_interval_end, created_at, last_updated_at)
     select $1, $2, 'Starting', s, least(s + make_interval(secs => $5::float8), $4::timestamptz), $6, $6
     from generate_series(0, $7::int - 1) k, lateral (select $3::timestamptz + make_interval(secs => $5::float8 * k) as s) t`,
    [exportId, backfill.id, start, end, stepSeconds, backfill.created_at, totalRuns],
  );
  return backfill;
}

export function backfillRunCount(start: Date, end: Date, stepSeconds: number): number {
  return Math.ceil((end.getTime() - start.getTime()) / (stepSeconds * 1000));
}

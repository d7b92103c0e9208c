// Plugin log entries from workers: stream PLUGIN_LOGS, subject plugin_logs.<teamId>.<pluginConfigId>,
// lines as PluginLogLine (lib/pipeline.ts) → table plugin_log_entries.
import type { JsMsg } from '@nats-io/jetstream';
import { cleanString, parsePipelineSubject, PIPELINE_STREAMS, PLUGIN_LOG_SOURCES, PLUGIN_LOG_TYPES } from '../../lib/index.js';
import { pgErrorCode, type Pool } from '../db/pool.js';
import { derivedId, isUuidText, parseLines, parseTimestamp } from './lines.js';
import type { Sink, SinkResult } from './stream-ingester.js';

export interface PluginLogRow {
  id: string;
  team_id: number;
  plugin_config_id: number;
  timestamp: Date;
  source: string;
  type: string;
  message: string;
  instance_id: string | null;
}

const SOURCES = new Set<string>(PLUGIN_LOG_SOURCES);
const TYPES = new Set<string>(PLUGIN_LOG_TYPES);
const STREAM = PIPELINE_STREAMS.pluginLogs.name;

function streamTime(msg: JsMsg): Date {
  return msg.time;
}

export function parsePluginLogMessage(msg: JsMsg): { rows: PluginLogRow[]; invalid: number } {
  const subject = parsePipelineSubject('pluginLogs', msg.subject);
  const lines = parseLines(msg.data);
  const configId = subject ? Number(subject.id) : NaN;
  if (!subject || !Number.isInteger(configId) || configId < 1 || configId > 2_147_483_647) return { rows: [], invalid: lines.length };
  const rows: PluginLogRow[] = [];
  let invalid = 0;
  let defaultTime: Date | undefined;
  lines.forEach((line, i) => {
    const timestamp = line?.timestamp === undefined ? (defaultTime ??= streamTime(msg)) : parseTimestamp(line.timestamp);
    const source = line?.source ?? 'PLUGIN';
    const type = line?.type ?? 'INFO';
    const instance = line?.instance_id ?? null;
    if (
      !line ||
      typeof line.message !== 'string' ||
      !timestamp ||
      typeof source !== 'string' ||
      !SOURCES.has(source) ||
      typeof type !== 'string' ||
      !TYPES.has(type) ||
      (line.id !== undefined && !isUuidText(line.id)) ||
      (instance !== null && !isUuidText(instance))
    ) {
      invalid++;
      return;
    }
    rows.push({
      id: (line.id) ?? derivedId(STREAM, msg.seq, i),
      team_id: subject.teamId,
      plugin_config_id: configId,
      timestamp,
      source,
      type,
      message: cleanString(line.message),
      instance_id: instance,
    });
  });
  return { rows, invalid };
}

const INSERT = `
  insert into plugin_log_entries (id, team_id, plugin_id, plugin_config_id, timestamp, source, type, message, instance_id)
  select v.id, c.team_id, c.plugin_id, c.id, v.ts, v.source, v.type, v.message, v.instance_id
  from unnest($1::uuid[], $2::int[], $3::int[], $4::timestamptz[], $5::text[], $6::text[], $7::text[], $8::uuid[])
    as v(id, team_id, config_id, ts, source, type, message, instance_id)
  join plugin_configs c on c.id = v.config_id and c.team_id = v.team_id
  on conflict (id) do nothing`;

async function insert(pool: Pool, rows: PluginLogRow[]): Promise<number> {
  const result = await pool.query(INSERT, [
    rows.map((r) => r.id),
    rows.map((r) => r.team_id),
    rows.map((r) => r.plugin_config_id),
    rows.map((r) => r.timestamp),
    rows.map((r) => r.source),
    rows.map((r) => r.type),
    rows.map((r) => r.message),
    rows.map((r) => r.instance_id),
  ]);
  return result.rowCount ?? 0;
}

/** Class 22 (data exception): a value PostgreSQL refuses; the rest of the batch must still go in. */
export function isDataError(err: unknown): boolean {
  return pgErrorCode(err)?.startsWith('22') ?? false;
}

/** Inserts rows; if PostgreSQL refuses a value, inserts them one by one and skips the bad ones. */
export async function insertSkippingBadRows<T>(pool: Pool, rows: T[], insertRows: (pool: Pool, rows: T[]) => Promise<number>): Promise<SinkResult> {
  try {
    const stored = await insertRows(pool, rows);
    return { stored, skipped: rows.length - stored };
  } catch (err) {
    if (!isDataError(err) || rows.length === 1) {
      if (isDataError(err)) return { stored: 0, skipped: 1 };
      throw err;
    }
    let stored = 0;
    for (const row of rows) stored += (await insertSkippingBadRows(pool, [row], insertRows)).stored;
    return { stored, skipped: rows.length - stored };
  }
}

export const pluginLogsSink: Sink<PluginLogRow> = {
  name: 'plugin_logs',
  stream: STREAM,
  durable: 'spate-admin-plugin-logs',
  parse: parsePluginLogMessage,
  write: (pool, rows) => insertSkippingBadRows(pool, rows, insert),
};

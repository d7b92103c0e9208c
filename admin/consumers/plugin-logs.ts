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
  /** The runtime gave the config up: disable it (lib/pipeline.ts PluginLogLine). */
  disable: string | null;
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
    const disable = line?.disable_plugin_config ?? null;
    if (
      (disable !== null && typeof disable !== 'string') ||
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
      disable: disable === null ? null : cleanString(disable),
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

/**
 * Lines with `disable_plugin_config`: the admin server, the only writer of admin state, disables
 * the config (as PATCH {"enabled": false} does) unless it changed after the line was written (a
 * person enabling it again since wins), and records the reason in the activity log. The KV record
 * follows through the table's trigger, and every worker tears the plugin down.
 */
const DISABLE_CONFIGS = `
  with disabled as (
    update plugin_configs c set enabled = false, updated_at = clock_timestamp()
    from unnest($1::int[], $2::int[], $3::text[], $4::timestamptz[]) as v(id, team_id, reason, ts)
    where c.id = v.id and c.team_id = v.team_id and c.enabled and c.updated_at < v.ts
    returning c.id, c.team_id, c.plugin_id, v.reason)
  insert into activity_log (organization_id, team_id, user_id, scope, item_id, activity, detail)
  select t.organization_id, disabled.team_id, null, 'PluginConfig', disabled.id::text, 'disabled',
    jsonb_build_object('name', p.name, 'changes', '[]'::jsonb, 'reason', disabled.reason, 'by', 'plugin runtime')
  from disabled join projects t on t.id = disabled.team_id join plugins p on p.id = disabled.plugin_id`;

async function write(pool: Pool, rows: PluginLogRow[]): Promise<SinkResult> {
  const result = await insertSkippingBadRows(pool, rows, insert);
  const disables = rows.filter((r) => r.disable !== null);
  if (disables.length > 0) {
    await pool.query(DISABLE_CONFIGS, [disables.map((r) => r.plugin_config_id), disables.map((r) => r.team_id), disables.map((r) => r.disable), disables.map((r) => r.timestamp)]);
  }
  return result;
}

export const pluginLogsSink: Sink<PluginLogRow> = {
  name: 'plugin_logs',
  stream: STREAM,
  durable: 'spate-admin-plugin-logs',
  parse: parsePluginLogMessage,
  write,
};

// PostgreSQL (docs/exports.md, "PostgreSQL"): events are COPYed (pg-copy-streams, text format)
// straight into the table inside one transaction that also records the run in a ledger table,
// `spate_batch_export_runs`, in the same schema. The ledger row is inserted first: a rerun (a
// retry, a crash, a second runner) finds it and delivers nothing again, and a concurrent
// attempt waits on its primary key and then does the same. So every event of a run is in the
// table exactly once, whatever the table's keys. Persons are COPYed into a temporary stage
// table and merged by upsert on (team_id, distinct_id), keeping the newest version.
import { once } from 'node:events';
import pg from 'pg';
import { from as copyFrom } from 'pg-copy-streams';
import type { Writable } from 'node:stream';
import type { EgressPolicy } from '../egress.js';
import { ExportError } from '../errors.js';
import type { ExportRecord, PersonRecord } from '../records.js';
import { pythonIsoUs } from '../records.js';
import type { Delivered, Destination, DestinationWriter, RunTarget } from './destination.js';

export interface PostgresConfig {
  user: string;
  password: string;
  host: string;
  database: string;
  schema?: string | null;
  table_name?: string | null;
  port?: number | null;
  has_self_signed_cert?: boolean | null;
}

export const LEDGER_TABLE = 'spate_batch_export_runs';

/** PostHog's events table, plus person_id, elements_chain and created_at (the contract's fields). */
export const EVENTS_TABLE_COLUMNS: ReadonlyArray<readonly [string, string]> = [
  ['uuid', 'VARCHAR(200)'],
  ['event', 'VARCHAR(200)'],
  ['properties', 'JSONB'],
  ['elements', 'JSONB'],
  ['set', 'JSONB'],
  ['set_once', 'JSONB'],
  ['distinct_id', 'VARCHAR(200)'],
  ['team_id', 'INTEGER'],
  ['ip', 'VARCHAR(200)'],
  ['site_url', 'VARCHAR(200)'],
  ['timestamp', 'TIMESTAMPTZ'],
  ['person_id', 'VARCHAR(200)'],
  ['elements_chain', 'TEXT'],
  ['created_at', 'TIMESTAMPTZ'],
];

/** PostHog's persons table: one row per (team_id, distinct_id). */
export const PERSONS_TABLE_COLUMNS: ReadonlyArray<readonly [string, string]> = [
  ['team_id', 'INTEGER NOT NULL'],
  ['distinct_id', 'TEXT NOT NULL'],
  ['person_id', 'TEXT NOT NULL'],
  ['properties', 'JSONB NOT NULL'],
  ['person_distinct_id_version', 'BIGINT NOT NULL'],
  ['person_version', 'BIGINT NOT NULL'],
  ['created_at', 'TIMESTAMPTZ NOT NULL'],
  ['updated_at', 'TIMESTAMPTZ NOT NULL DEFAULT now()'],
  ['is_deleted', 'BOOLEAN NOT NULL DEFAULT FALSE'],
];

/** COPY text format: backslash, tab, newline and carriage return escaped; NUL (which PostgreSQL cannot store) dropped. */
function text(value: string): string {
  return value.replace(/[\\\t\n\r\u0000]/g, (c) => (c === '\\' ? '\\\\' : c === '\t' ? '\\t' : c === '\n' ? '\\n' : c === '\r' ? '\\r' : ''));
}

/** JSON text jsonb accepts: an escaped NUL (\u0000, not preceded by another backslash) is removed. */
function jsonText(value: unknown): string {
  const json = JSON.stringify(value);
  return text(json.includes('\\u0000') ? json.replace(/(?<!\\)((?:\\\\)*)\\u0000/g, '$1') : json);
}

const EVENT_VALUE: Record<string, (r: ExportRecord) => string> = {
  uuid: (r) => text(r.uuid),
  event: (r) => text(r.event),
  properties: (r) => jsonText(r.properties),
  elements: (r) => jsonText(r.elements_chain),
  set: (r) => (r.set === null ? '\\N' : jsonText(r.set)),
  set_once: (r) => (r.set_once === null ? '\\N' : jsonText(r.set_once)),
  distinct_id: (r) => text(r.distinct_id),
  team_id: (r) => String(r.team_id),
  ip: (r) => (typeof r.properties.$ip === 'string' ? text(r.properties.$ip) : '\\N'),
  site_url: () => '\\N',
  timestamp: (r) => pythonIsoUs(r.timestampUs),
  person_id: (r) => (r.person_id === null ? '\\N' : text(r.person_id)),
  elements_chain: (r) => text(r.elements_chain),
  created_at: (r) => pythonIsoUs(r.insertedAtUs),
};

const PERSON_VALUE: Record<string, (r: PersonRecord) => string> = {
  team_id: (r) => String(r.team_id),
  distinct_id: (r) => text(r.distinct_id),
  person_id: (r) => text(r.person_id),
  properties: (r) => jsonText(r.properties),
  person_distinct_id_version: (r) => String(r.person_distinct_id_version),
  person_version: (r) => String(r.person_version),
  created_at: (r) => pythonIsoUs(r.createdAtUs),
  updated_at: (r) => pythonIsoUs(r.insertedAtUs),
  is_deleted: (r) => (r.is_deleted ? 't' : 'f'),
};

const PG_ERRORS: Record<string, ExportError['code']> = {
  '28000': 'access_denied', // invalid authorization
  '28P01': 'access_denied', // invalid password
  '42501': 'access_denied', // insufficient privilege
  '3D000': 'not_found', // database does not exist
  '3F000': 'not_found', // schema does not exist
  '42P01': 'not_found', // table does not exist
  '42703': 'invalid_config', // column does not exist
  '22P02': 'invalid_config', // invalid text representation (a user column of another type)
  '42804': 'invalid_config', // datatype mismatch
  '22001': 'invalid_config', // string too long for the column
  '23502': 'invalid_config', // not null violation
  '23505': 'invalid_config', // a unique key of the user's table
};

export function postgresError(err: unknown, where: string): ExportError {
  if (err instanceof ExportError) return err;
  const e = err as { code?: string; message?: string };
  const code = e?.code && PG_ERRORS[e.code];
  const message = `PostgreSQL ${where}: ${e?.message ?? String(err)}${e?.code && /^[0-9A-Z]{5}$/.test(e.code) ? ` (SQLSTATE ${e.code})` : ''}`;
  return new ExportError(code || 'unavailable', message, { cause: err });
}

export class PostgresDestination implements Destination {
  readonly type = 'Postgres' as const;
  readonly schema: string;
  readonly table: string;

  constructor(
    private readonly config: PostgresConfig,
    private readonly egress: EgressPolicy,
    private readonly model: 'events' | 'persons',
  ) {
    if (!config.host || !config.database) throw new ExportError('invalid_config', 'Postgres: host and database are required');
    this.schema = config.schema || 'public';
    this.table = config.table_name || (model === 'persons' ? 'persons' : 'events');
  }

  private get where(): string {
    return `${this.config.host}:${this.config.port ?? 5432}/${this.config.database} table ${this.schema}.${this.table}`;
  }

  private get qualified(): string {
    return `${pg.escapeIdentifier(this.schema)}.${pg.escapeIdentifier(this.table)}`;
  }

  private async connect(): Promise<pg.Client> {
    const address = await this.egress.resolve(this.config.host);
    const loopback = /^127\.|^::1$|^::ffff:127\./.test(address);
    const client = new pg.Client({
      host: address,
      port: this.config.port ?? 5432,
      user: this.config.user,
      password: this.config.password,
      database: this.config.database,
      // TLS as PostHog requires it, except on loopback (a local cluster exporting to itself).
      ssl: loopback ? false : { servername: this.config.host, rejectUnauthorized: this.config.has_self_signed_cert !== true },
      connectionTimeoutMillis: 10_000,
      application_name: 'spate-batch-export',
    });
    client.on('error', () => undefined); // a dropped connection fails the statement in flight
    try {
      await client.connect();
    } catch (err) {
      await client.end().catch(() => undefined);
      throw postgresError(err, this.where);
    }
    return client;
  }

  private async ensureTables(client: pg.Client): Promise<string[]> {
    const columns = this.model === 'persons' ? PERSONS_TABLE_COLUMNS : EVENTS_TABLE_COLUMNS;
    const key = this.model === 'persons' ? ', PRIMARY KEY (team_id, distinct_id)' : '';
    // CREATE TABLE IF NOT EXISTS is not safe against itself (two runs into one database at once
    // collide on the catalog's keys): Spate's runs take turns on an advisory lock of their own.
    await client.query('BEGIN');
    try {
      await client.query("SELECT pg_advisory_xact_lock(hashtext('spate batch export tables'))");
      await client.query(`CREATE TABLE IF NOT EXISTS ${this.qualified} (${columns.map(([n, t]) => `${pg.escapeIdentifier(n)} ${t}`).join(', ')}${key})`);
      await client.query(
        `CREATE TABLE IF NOT EXISTS ${pg.escapeIdentifier(this.schema)}.${LEDGER_TABLE} (run_id text PRIMARY KEY, target_table text NOT NULL, data_interval_start timestamptz NOT NULL, data_interval_end timestamptz NOT NULL, records bigint, exported_at timestamptz NOT NULL DEFAULT now())`,
      );
      await client.query('COMMIT');
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw err;
    }
    const { rows } = await client.query<{ column_name: string }>(
      'SELECT column_name FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2 ORDER BY ordinal_position',
      [this.schema, this.table],
    );
    // PostHog writes the columns the table has: a user's table with fewer columns still works.
    const known = this.model === 'persons' ? PERSON_VALUE : EVENT_VALUE;
    const usable = rows.map((r) => r.column_name).filter((c) => c in known);
    if (usable.length === 0) throw new ExportError('invalid_config', `PostgreSQL ${this.where} has none of the columns an export writes (${Object.keys(known).join(', ')})`);
    return usable;
  }

  async check(): Promise<void> {
    const client = await this.connect();
    try {
      await this.ensureTables(client);
      const { rows } = await client.query<{ ok: boolean }>(`SELECT has_table_privilege($1, 'INSERT') AS ok`, [`${pg.escapeIdentifier(this.schema)}.${pg.escapeIdentifier(this.table)}`]);
      if (!rows[0]?.ok) throw new ExportError('access_denied', `PostgreSQL ${this.where}: user ${this.config.user} may not INSERT`);
    } catch (err) {
      throw postgresError(err, this.where);
    } finally {
      await client.end().catch(() => undefined);
    }
  }

  async open(run: RunTarget): Promise<DestinationWriter> {
    const client = await this.connect();
    try {
      const columns = await this.ensureTables(client);
      await client.query('BEGIN');
      // First: a rerun finds the run delivered; a concurrent attempt waits here for ours to end.
      const ledger = await client.query(
        `INSERT INTO ${pg.escapeIdentifier(this.schema)}.${LEDGER_TABLE} (run_id, target_table, data_interval_start, data_interval_end) VALUES ($1, $2, $3, $4) ON CONFLICT (run_id) DO NOTHING`,
        [run.runId, `${this.schema}.${this.table}`, run.start, run.end],
      );
      if (ledger.rowCount === 0) {
        await client.query('ROLLBACK');
        const { rows } = await client.query<{ records: string | null }>(`SELECT records FROM ${pg.escapeIdentifier(this.schema)}.${LEDGER_TABLE} WHERE run_id = $1`, [run.runId]);
        return new DeliveredBefore(client, Number(rows[0]?.records ?? 0), this.where);
      }
      return new PostgresWriter(client, this.model, this.qualified, columns, run, this.where);
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      await client.end().catch(() => undefined);
      throw postgresError(err, this.where);
    }
  }

  async close(): Promise<void> {}
}

/** A run the ledger shows as delivered: nothing is written again. */
class DeliveredBefore implements DestinationWriter {
  constructor(private readonly client: pg.Client, private readonly records: number, private readonly where: string) {}
  async writeEvents(): Promise<void> {}
  async writePersons(): Promise<void> {}
  async commit(): Promise<Delivered> {
    await this.client.end().catch(() => undefined);
    return { records: this.records, bytes: 0, detail: `already delivered to ${this.where} (ledger ${LEDGER_TABLE}): nothing written again` };
  }
  async abort(): Promise<void> {
    await this.client.end().catch(() => undefined);
  }
}

class PostgresWriter implements DestinationWriter {
  private copy: Writable | undefined;
  private copyDone: Promise<unknown> | undefined;
  private records = 0;
  private bytes = 0;
  private readonly stage: string;
  private readonly runId: string;

  constructor(
    private readonly client: pg.Client,
    private readonly model: 'events' | 'persons',
    private readonly target: string,
    private readonly columns: string[],
    run: RunTarget,
    private readonly where: string,
  ) {
    this.runId = run.runId;
    this.stage = pg.escapeIdentifier(`spate_stage_${run.runId.replace(/-/g, '')}`);
  }

  private async stream(): Promise<Writable> {
    if (this.copy) return this.copy;
    const cols = this.columns.map((c) => pg.escapeIdentifier(c)).join(', ');
    let into = this.target;
    if (this.model === 'persons') {
      await this.client.query(`CREATE TEMP TABLE ${this.stage} (LIKE ${this.target} INCLUDING DEFAULTS) ON COMMIT DROP`);
      into = this.stage;
    }
    const copy = this.client.query(copyFrom(`COPY ${into} (${cols}) FROM STDIN`));
    this.copyDone = new Promise((resolve, reject) => {
      copy.on('finish', resolve);
      copy.on('error', reject);
    });
    this.copyDone.catch(() => undefined);
    this.copy = copy;
    return copy;
  }

  private async send(lines: string[]): Promise<void> {
    if (lines.length === 0) return;
    const copy = await this.stream();
    const chunk = lines.join('');
    this.bytes += Buffer.byteLength(chunk);
    if (!copy.write(chunk)) await Promise.race([once(copy, 'drain'), this.copyDone]);
  }

  async writeEvents(records: readonly ExportRecord[]): Promise<void> {
    const values = this.columns.map((c) => EVENT_VALUE[c]!);
    const lines = records.map((r) => values.map((v) => v(r)).join('\t') + '\n');
    this.records += records.length;
    await this.send(lines);
  }

  async writePersons(records: readonly PersonRecord[]): Promise<void> {
    const values = this.columns.map((c) => PERSON_VALUE[c]!);
    const lines = records.map((r) => values.map((v) => v(r)).join('\t') + '\n');
    this.records += records.length;
    await this.send(lines);
  }

  async commit(): Promise<Delivered> {
    try {
      if (this.copy) {
        this.copy.end();
        await this.copyDone;
      }
      if (this.model === 'persons' && this.copy) {
        const cols = this.columns.filter((c) => c !== 'team_id' && c !== 'distinct_id');
        // The newest version wins, whichever run delivers it; an older one changes nothing.
        await this.client.query(
          `INSERT INTO ${this.target} AS final (${this.columns.map((c) => pg.escapeIdentifier(c)).join(', ')})
           SELECT DISTINCT ON (team_id, distinct_id) ${this.columns.map((c) => pg.escapeIdentifier(c)).join(', ')} FROM ${this.stage}
           ORDER BY team_id, distinct_id, person_version DESC, person_distinct_id_version DESC
           ON CONFLICT (team_id, distinct_id) DO UPDATE SET ${cols.map((c) => `${pg.escapeIdentifier(c)} = EXCLUDED.${pg.escapeIdentifier(c)}`).join(', ')}
           WHERE EXCLUDED.person_version > final.person_version OR EXCLUDED.person_distinct_id_version > final.person_distinct_id_version`,
        );
      }
      await this.client.query(`UPDATE ${this.ledgerName()} SET records = $2 WHERE run_id = $1`, [this.runId, this.records]);
      await this.client.query('COMMIT');
    } catch (err) {
      await this.client.query('ROLLBACK').catch(() => undefined);
      throw postgresError(err, this.where);
    } finally {
      await this.client.end().catch(() => undefined);
    }
    return { records: this.records, bytes: this.bytes, detail: `${this.records} rows into ${this.where}` };
  }

  private ledgerName(): string {
    return `${this.target.split('.')[0]}.${LEDGER_TABLE}`;
  }

  async abort(): Promise<void> {
    this.copy?.destroy();
    await this.client.query('ROLLBACK').catch(() => undefined);
    await this.client.end().catch(() => undefined);
  }
}

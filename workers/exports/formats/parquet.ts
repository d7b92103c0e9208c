// Parquet files with hyparquet-writer (pure JS), chosen by bench/exports/parquet-writers.ts over
// parquet-wasm: 1.1-2.2x faster on the same rows for every codec both offer (docs/exports.md).
// Rows are written in row groups of ROW_GROUP_ROWS; each group's bytes go to the sink as soon as
// it is encoded, so memory holds one row group, not the file. Column types follow PostHog's
// (pyarrow): strings, JSON columns as JSON text, timestamps as microseconds UTC.
import type { Writable } from 'node:stream';
import { finished } from 'node:stream/promises';
import { brotliCompressSync, constants, gzipSync } from 'node:zlib';
import { ByteWriter, ParquetWriter, type SchemaElement } from 'hyparquet-writer';
import { ExportError } from '../errors.js';
import type { ExportRecord, PersonRecord } from '../records.js';
import { drained } from './drained.js';
import type { RecordFile } from './file-writer.js';

export const ROW_GROUP_ROWS = 20_000;

type Column = { name: string; kind: 'string' | 'json' | 'int' | 'bool' | 'timestamp'; optional?: boolean };

const EVENT_COLUMNS: Column[] = [
  { name: 'uuid', kind: 'string' },
  { name: 'event', kind: 'string' },
  { name: 'properties', kind: 'json', optional: true },
  { name: 'distinct_id', kind: 'string' },
  { name: 'team_id', kind: 'int' },
  { name: 'timestamp', kind: 'timestamp' },
  { name: 'person_id', kind: 'string', optional: true },
  { name: 'elements_chain', kind: 'string' },
  { name: 'set', kind: 'json', optional: true },
  { name: 'set_once', kind: 'json', optional: true },
  { name: 'created_at', kind: 'timestamp' },
  { name: '_inserted_at', kind: 'timestamp' },
];

const PERSON_COLUMNS: Column[] = [
  { name: 'team_id', kind: 'int' },
  { name: 'distinct_id', kind: 'string' },
  { name: 'person_id', kind: 'string' },
  { name: 'properties', kind: 'json', optional: true },
  { name: 'person_version', kind: 'int' },
  { name: 'person_distinct_id_version', kind: 'int' },
  { name: 'created_at', kind: 'timestamp' },
  { name: 'is_deleted', kind: 'bool' },
  { name: '_inserted_at', kind: 'timestamp' },
];

function schemaOf(columns: Column[]): SchemaElement[] {
  return [
    { name: 'root', num_children: columns.length },
    ...columns.map((c): SchemaElement => {
      const repetition_type = c.optional ? 'OPTIONAL' : 'REQUIRED';
      switch (c.kind) {
        case 'string':
          return { name: c.name, type: 'BYTE_ARRAY', converted_type: 'UTF8', repetition_type };
        case 'json':
          return { name: c.name, type: 'BYTE_ARRAY', converted_type: 'UTF8', repetition_type };
        case 'int':
          return { name: c.name, type: 'INT64', repetition_type };
        case 'bool':
          return { name: c.name, type: 'BOOLEAN', repetition_type };
        case 'timestamp':
          return { name: c.name, type: 'INT64', repetition_type, logical_type: { type: 'TIMESTAMP', isAdjustedToUTC: true, unit: 'MICROS' } };
      }
    }),
  ];
}

const CODECS: Record<string, 'SNAPPY' | 'GZIP' | 'BROTLI' | 'UNCOMPRESSED'> = {
  snappy: 'SNAPPY',
  gzip: 'GZIP',
  brotli: 'BROTLI',
  none: 'UNCOMPRESSED',
};

const COMPRESSORS = {
  GZIP: (b: Uint8Array) => gzipSync(b, { level: 6 }),
  BROTLI: (b: Uint8Array) => brotliCompressSync(b, { params: { [constants.BROTLI_PARAM_QUALITY]: 5 } }),
};

/** A ByteWriter that hands each encoded row group to `drain` and starts over (offset keeps counting). */
class DrainingWriter extends ByteWriter {
  constructor(private readonly drain: (bytes: Uint8Array) => void) {
    super(1 << 20);
  }
  flush(): void {
    if (this.index === 0) return;
    this.drain(new Uint8Array(this.buffer.slice(0, this.index)));
    this.index = 0;
  }
  override finish(): void {
    this.flush();
  }
}

export class ParquetFile implements RecordFile {
  textBytes = 0;
  records = 0;
  private readonly columns: Column[];
  private readonly writer: ParquetWriter;
  private readonly byteWriter: DrainingWriter;
  private rows: unknown[][];
  private drained: Uint8Array[] = [];

  constructor(private readonly sink: Writable, model: 'events' | 'persons', compression: string | null) {
    const codec = CODECS[compression ?? 'snappy'];
    if (!codec) {
      throw new ExportError(
        'invalid_config',
        `Parquet compression ${String(compression)} is not supported by this runner: snappy (default), gzip, brotli or none`,
      );
    }
    this.columns = model === 'events' ? EVENT_COLUMNS : PERSON_COLUMNS;
    this.rows = this.columns.map(() => []);
    this.byteWriter = new DrainingWriter((bytes) => this.drained.push(bytes));
    this.writer = new ParquetWriter({ writer: this.byteWriter, schema: schemaOf(this.columns), codec, compressors: COMPRESSORS, createdBy: 'spate batch export' });
  }

  writeEvent(r: ExportRecord): Promise<void> | undefined {
    const json = JSON.stringify(r.properties);
    const set = r.set === null ? null : JSON.stringify(r.set);
    const setOnce = r.set_once === null ? null : JSON.stringify(r.set_once);
    const inserted = BigInt(r.insertedAtUs);
    this.push(
      [r.uuid, r.event, json, r.distinct_id, BigInt(r.team_id), BigInt(r.timestampUs), r.person_id, r.elements_chain, set, setOnce, inserted, inserted],
      json.length + r.uuid.length + r.event.length + r.distinct_id.length + 200,
    );
    return this.rows[0]!.length >= ROW_GROUP_ROWS ? this.writeGroup() : undefined;
  }

  writePerson(r: PersonRecord): Promise<void> | undefined {
    const json = JSON.stringify(r.properties);
    this.push(
      [BigInt(r.team_id), r.distinct_id, r.person_id, json, BigInt(r.person_version), BigInt(r.person_distinct_id_version), BigInt(r.createdAtUs), r.is_deleted, BigInt(r.insertedAtUs)],
      json.length + r.distinct_id.length + 150,
    );
    return this.rows[0]!.length >= ROW_GROUP_ROWS ? this.writeGroup() : undefined;
  }

  private push(values: unknown[], textBytes: number): void {
    values.forEach((v, i) => this.rows[i]!.push(v));
    this.records++;
    this.textBytes += textBytes;
  }

  private async writeGroup(): Promise<void> {
    if (this.rows[0]!.length === 0) return;
    const columnData = this.columns.map((c, i) => ({ name: c.name, data: this.rows[i]! as never[] }));
    this.rows = this.columns.map(() => []);
    await this.writer.write({ columnData, rowGroupSize: ROW_GROUP_ROWS });
    await this.sendDrained();
  }

  private async sendDrained(): Promise<void> {
    for (const bytes of this.drained.splice(0)) if (!this.sink.write(bytes)) await drained(this.sink);
  }

  async end(): Promise<void> {
    await this.writeGroup();
    await this.writer.finish();
    await this.sendDrained();
    this.sink.end();
    await finished(this.sink, { readable: false });
  }
}

// `npx tsx bench/exports/parquet-writers.ts [--rows N]`: the Parquet writer for S3 exports, chosen by
// this measurement (docs/exports.md): hyparquet-writer (pure JS) against parquet-wasm (arrow-rs
// through apache-arrow IPC), the same N event rows, the same codecs, one process, in rounds that
// take the cases in turn. Both writers are synchronous in this thread, so this process's CPU time
// is their work: rows per CPU second hold on a busy machine, where the wall-clock rate does not.
import { randomUUID } from 'node:crypto';
import { gzipSync, brotliCompressSync, constants } from 'node:zlib';
import { tableFromArrays, tableToIPC } from 'apache-arrow';
import { ByteWriter, ParquetWriter } from 'hyparquet-writer';
import * as pw from 'parquet-wasm';
import { parseBenchArgs, usageError } from '../lib/cli.js';

const USAGE = `usage: npx tsx bench/exports/parquet-writers.ts [--rows N] [--rounds R]

Writes the same N event rows (default 200,000) to Parquet with hyparquet-writer and with
parquet-wasm, with each codec (SNAPPY, GZIP, BROTLI; ZSTD for parquet-wasm), R rounds (default 3)
that take the cases in turn after a warm-up, all in this process, and prints for each the median
rows per second of this process's CPU time (user + system) and of wall-clock time, and the file
size: how the S3 exports' writer was chosen.

  --rows N      rows written by each writer and codec (default 200000)
  --rounds R    measured rounds (default 3)
  -h, --help    this text`;

const { values } = parseBenchArgs(USAGE, { options: { rows: { type: 'string', default: '200000' }, rounds: { type: 'string', default: '3' } } });
const n = Number(values.rows);
if (!Number.isInteger(n) || n < 1) usageError(USAGE, `--rows must be a positive integer, not ${values.rows}`);
const rounds = Number(values.rounds);
if (!Number.isInteger(rounds) || rounds < 1) usageError(USAGE, `--rounds must be a positive integer, not ${values.rounds}`);
const base = Date.parse('2026-11-25T00:00:00Z');
const rows = Array.from({ length: n }, (_, i) => ({
  uuid: randomUUID(),
  event: `event_${i % 20}`,
  properties: JSON.stringify({ $current_url: `https://example.com/p/${i % 500}`, plan: i % 3 ? 'free' : 'pro', i, $browser: 'Chrome' }),
  distinct_id: `user-${i % 20_000}`,
  person_id: randomUUID(),
  timestamp: (base + i * 10) * 1000,
  created_at: (base + i * 10 + 5) * 1000,
}));

function columns() {
  return {
    uuid: rows.map((r) => r.uuid),
    event: rows.map((r) => r.event),
    properties: rows.map((r) => r.properties),
    distinct_id: rows.map((r) => r.distinct_id),
    person_id: rows.map((r) => r.person_id),
    timestamp: rows.map((r) => BigInt(r.timestamp)),
    created_at: rows.map((r) => BigInt(r.created_at)),
  };
}

function hyparquet(codec: 'SNAPPY' | 'GZIP' | 'BROTLI'): number {
  const c = columns();
  const writer = new ByteWriter();
  const pq = new ParquetWriter({
    writer,
    schema: [
      { name: 'root', num_children: 7 },
      { name: 'uuid', type: 'BYTE_ARRAY', converted_type: 'UTF8', repetition_type: 'REQUIRED' },
      { name: 'event', type: 'BYTE_ARRAY', converted_type: 'UTF8', repetition_type: 'REQUIRED' },
      { name: 'properties', type: 'BYTE_ARRAY', converted_type: 'UTF8', repetition_type: 'OPTIONAL' },
      { name: 'distinct_id', type: 'BYTE_ARRAY', converted_type: 'UTF8', repetition_type: 'REQUIRED' },
      { name: 'person_id', type: 'BYTE_ARRAY', converted_type: 'UTF8', repetition_type: 'OPTIONAL' },
      { name: 'timestamp', type: 'INT64', converted_type: 'TIMESTAMP_MICROS', repetition_type: 'REQUIRED' },
      { name: 'created_at', type: 'INT64', converted_type: 'TIMESTAMP_MICROS', repetition_type: 'REQUIRED' },
    ],
    codec,
    compressors: { GZIP: (b) => gzipSync(b, { level: 6 }), BROTLI: (b) => brotliCompressSync(b, { params: { [constants.BROTLI_PARAM_QUALITY]: 5 } }) },
  });
  const columnData = Object.entries(c).map(([name, data]) => ({ name, data }));
  void pq.write({ columnData, rowGroupSize: 100_000 });
  void pq.finish();
  return writer.getBytes().length;
}

function wasm(codec: 'SNAPPY' | 'GZIP' | 'BROTLI' | 'ZSTD'): number {
  const c = columns();
  const table = tableFromArrays({ ...c, timestamp: BigInt64Array.from(c.timestamp), created_at: BigInt64Array.from(c.created_at) });
  const props = new pw.WriterPropertiesBuilder().setCompression(pw.Compression[codec]).setMaxRowGroupSize(100_000).build();
  return pw.writeParquet(pw.Table.fromIPCStream(tableToIPC(table, 'stream')), props).length;
}

const cases = [
  ['hyparquet-writer SNAPPY', () => hyparquet('SNAPPY')],
  ['parquet-wasm SNAPPY', () => wasm('SNAPPY')],
  ['hyparquet-writer GZIP', () => hyparquet('GZIP')],
  ['parquet-wasm GZIP', () => wasm('GZIP')],
  ['hyparquet-writer BROTLI', () => hyparquet('BROTLI')],
  ['parquet-wasm BROTLI', () => wasm('BROTLI')],
  ['parquet-wasm ZSTD', () => wasm('ZSTD')],
] as const;

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const measured = cases.map(() => ({ cpu: [] as number[], wall: [] as number[], bytes: 0 }));
for (const [, run] of cases) run(); // warm-up
for (let round = 0; round < rounds; round++) {
  cases.forEach(([, run], i) => {
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    measured[i]!.bytes = run();
    const wall = (performance.now() - t0) / 1000;
    const { user, system } = process.cpuUsage(cpu0);
    measured[i]!.cpu.push(n / ((user + system) / 1e6));
    measured[i]!.wall.push(n / wall);
  });
}
const rate = (x: number) => Math.round(x).toLocaleString('en-US').padStart(10);
console.log(`${'writer and codec'.padEnd(26)} ${'rows/CPU s'.padStart(10)} ${'rows/s'.padStart(10)}  file   (${n.toLocaleString('en-US')} rows, median of ${rounds})`);
cases.forEach(([name], i) => {
  const m = measured[i]!;
  console.log(`${name.padEnd(26)} ${rate(median(m.cpu))} ${rate(median(m.wall))}  ${(m.bytes / 1e6).toFixed(1)} MB`);
});

// Benchmark results: medians of several runs, written as Markdown and JSON under bench/results/.
// Written after every stage (not only at the end), so a stage that fails or hangs costs only
// its own figures.
import { mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { RunInfo } from './run-info.js';

export function median(values: readonly number[]): number {
  const v = values.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (v.length === 0) return Number.NaN;
  const mid = Math.floor(v.length / 2);
  return v.length % 2 ? v[mid]! : (v[mid - 1]! + v[mid]!) / 2;
}

export interface Table {
  title: string;
  note?: string;
  columns: string[];
  rows: (string | number)[][];
}

function cell(v: string | number): string {
  if (typeof v === 'string') return v.replace(/\|/g, '\\|').replace(/\n/g, ' ');
  if (!Number.isFinite(v)) return '–';
  if (Number.isInteger(v) || Math.abs(v) >= 100) return Math.round(v).toLocaleString('en-US');
  if (Math.abs(v) >= 10) return v.toFixed(1);
  return v.toFixed(2);
}

export function markdownTable(t: Table): string {
  const lines = [`### ${t.title}`, ''];
  if (t.note) lines.push(t.note, '');
  if (t.rows.length === 0) return lines.join('\n').trimEnd();
  lines.push(`| ${t.columns.join(' | ')} |`, `|${t.columns.map(() => '---').join('|')}|`);
  for (const row of t.rows) lines.push(`| ${row.map(cell).join(' | ')} |`);
  return lines.join('\n');
}

export function runDescription(info: RunInfo, elapsedS?: number): string {
  const v = info.versions;
  return [
    `Machine: ${info.cpu}, ${info.cores} cores, ${info.memoryGiB} GiB, Linux ${info.kernel}; load average ${info.loadAverage} when it started.`,
    `Commit: ${info.commit}. Versions: Node ${v.node}; ${v.natsServer}; PostgreSQL ${v.postgres}; autocannon ${v.autocannon}; uWS ${v.uws}.`,
    `Command: \`${info.command}\`. Load generator (autocannon, undici), servers, nats-server and PostgreSQL share the same cores.`,
    ...(elapsedS === undefined ? [] : [`Elapsed: ${elapsedS.toFixed(1)} s.`]),
  ].join('\n');
}

/** Writes <name>.md and <name>.json atomically (a reader never sees half a file). */
export function writeResults(dir: string, name: string, o: { info: RunInfo; elapsedS?: number; tables: Table[]; data: unknown; extra?: string }): { md: string; json: string } {
  mkdirSync(dir, { recursive: true });
  const md = join(dir, `${name}.md`);
  const json = join(dir, `${name}.json`);
  const header = `# Spate benchmark — ${o.info.date.slice(0, 10)}\n\n${runDescription(o.info, o.elapsedS)}`;
  const write = (path: string, text: string) => {
    writeFileSync(`${path}.tmp`, text);
    renameSync(`${path}.tmp`, path);
  };
  write(md, [header, ...o.tables.map(markdownTable), ...(o.extra ? [o.extra] : [])].join('\n\n') + '\n');
  write(json, JSON.stringify({ run: o.info, elapsedS: o.elapsedS, tables: o.tables, data: o.data }, jsonNumbers, 2) + '\n');
  return { md, json };
}

/** A value as its JSON file holds it (what a reader of the file gets back). */
export function asJson(value: unknown): unknown {
  return JSON.parse(JSON.stringify(value, jsonNumbers)) as unknown;
}

/** NaN and Infinity are not JSON: written as null. Maps as objects. */
function jsonNumbers(_key: string, value: unknown): unknown {
  if (typeof value === 'number' && !Number.isFinite(value)) return null;
  if (value instanceof Map) return Object.fromEntries(value);
  return value;
}

// Benchmark results: medians of several runs, written as Markdown and JSON under bench/results/.
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, release, totalmem } from 'node:os';
import { join } from 'node:path';

export function median(values: readonly number[]): number {
  const v = values.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (v.length === 0) return Number.NaN;
  const mid = Math.floor(v.length / 2);
  return v.length % 2 ? v[mid]! : (v[mid - 1]! + v[mid]!) / 2;
}

export interface MachineInfo {
  date: string;
  cpu: string;
  cores: number;
  memoryGiB: number;
  kernel: string;
  node: string;
  natsServer: string;
  uws: string;
  command: string;
}

export function machineInfo(): MachineInfo {
  let natsServer = 'unknown';
  try {
    natsServer = execFileSync(process.env.NATS_SERVER_BIN ?? 'nats-server', ['--version'], { encoding: 'utf8' }).trim();
  } catch {
    // reported as unknown
  }
  let uws = 'unknown';
  try {
    uws = (JSON.parse(readFileSync(new URL('../../../node_modules/uWebSockets.js/package.json', import.meta.url), 'utf8')) as { name: string; version: string }).version;
  } catch {
    // reported as unknown
  }
  return {
    date: new Date().toISOString(),
    cpu: cpus()[0]?.model ?? 'unknown',
    cores: cpus().length,
    memoryGiB: Math.round(totalmem() / 1024 ** 3),
    kernel: release(),
    node: process.version,
    natsServer,
    uws,
    command: `npm run bench -- ${process.argv.slice(2).join(' ')}`.trim(),
  };
}

export interface Table {
  title: string;
  note?: string;
  columns: string[];
  rows: (string | number)[][];
}

function cell(v: string | number): string {
  if (typeof v === 'string') return v;
  if (!Number.isFinite(v)) return '–';
  if (Math.abs(v) >= 100) return Math.round(v).toLocaleString('en-US');
  if (Math.abs(v) >= 10) return v.toFixed(1);
  return v.toFixed(2);
}

export function markdownTable(t: Table): string {
  const lines = [`### ${t.title}`, ''];
  if (t.note) lines.push(t.note, '');
  lines.push(`| ${t.columns.join(' | ')} |`, `|${t.columns.map(() => '---').join('|')}|`);
  for (const row of t.rows) lines.push(`| ${row.map(cell).join(' | ')} |`);
  return lines.join('\n');
}

export function writeResults(dir: string, name: string, machine: MachineInfo, tables: Table[], data: unknown, extra = ''): { md: string; json: string } {
  mkdirSync(dir, { recursive: true });
  const md = join(dir, `${name}.md`);
  const json = join(dir, `${name}.json`);
  const header = [
    `# Spate benchmark — ${machine.date.slice(0, 10)}`,
    '',
    `Machine: ${machine.cpu}, ${machine.cores} cores, ${machine.memoryGiB} GiB, Linux ${machine.kernel}; Node ${machine.node}; ${machine.natsServer}; uWS ${machine.uws}.`,
    `Command: \`${machine.command}\`. Load generator (autocannon), servers and nats-server share the same cores.`,
    '',
  ].join('\n');
  writeFileSync(md, [header, ...tables.map(markdownTable), extra].join('\n\n') + '\n');
  writeFileSync(json, JSON.stringify({ machine, tables, data }, null, 2) + '\n');
  return { md, json };
}

// Draws the charts of benchmark reports again from their JSON, without measuring anything: after
// a change to the charts (bench/lib/charts.ts), the committed reports get the new drawing.
import { mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseBenchArgs, usageError } from './lib/cli.js';
import { suiteCharts, type SuiteChartData } from './lib/suite-report.js';

// bench/charts.ts under tsx, dist/bench/charts.js once built: the reports are in the source tree.
const here = dirname(fileURLToPath(import.meta.url));
const RESULTS = join(here, basename(dirname(here)) === 'dist' ? '../../bench/results' : 'results');

const USAGE = `usage: npx tsx bench/charts.ts [--out DIR] [REPORT.json…]

Draws the SVG charts of benchmark reports (<name>-throughput.svg, <name>-latency.svg,
<name>-e2e-lag.svg) from the figures in their JSON, beside each report or into DIR. Without a
REPORT, every report of npm run bench in bench/results/ (other programs' JSON there is skipped).

  --out DIR     write the charts here instead of beside each report
  -h, --help    this text`;

const { values, positionals } = parseBenchArgs(USAGE, { options: { out: { type: 'string' } }, allowPositionals: true });

const reports = positionals.length
  ? positionals
  : readdirSync(RESULTS)
      .filter((f) => f.endsWith('.json'))
      .sort()
      .map((f) => join(RESULTS, f));
if (reports.length === 0) usageError(USAGE, `no reports in ${RESULTS}`);
if (values.out) mkdirSync(values.out, { recursive: true });

for (const report of reports) {
  let data: SuiteChartData;
  try {
    data = (JSON.parse(readFileSync(report, 'utf8')) as { data: SuiteChartData }).data;
  } catch (err) {
    usageError(USAGE, `${report}: ${(err as Error).message}`);
  }
  if (typeof data?.capture !== 'object') {
    // bench/results/ also holds other programs' JSON (bench/streams, …): skipped there, refused when named.
    if (positionals.length) usageError(USAGE, `${report}: not a report of npm run bench (no data.capture)`);
    console.log(`${report}: not a report of npm run bench, skipped`);
    continue;
  }
  const name = basename(report, '.json');
  const markdown = await suiteCharts(data, values.out ?? dirname(report), name);
  const drawn = [...markdown.matchAll(/\(([^)]+\.svg)\)/g)].map((m) => m[1]);
  console.log(`${report}: ${drawn.length ? drawn.join(', ') : 'nothing to draw'}`);
}

// Benchmark charts as SVG, drawn by Vega-Lite + Vega headless (pure JS: no canvas, no browser).
import { writeFileSync } from 'node:fs';
import * as vega from 'vega';
import { compile, type TopLevelSpec } from 'vega-lite';

export interface ThroughputBar {
  scenario: string;
  /** What was measured: Spate, the baseline, or a ceiling. */
  series: string;
  eventsPerSec: number;
}

export interface LatencyPoint {
  /** Offered load as a percentage of the measured maximum. */
  percentOfMax: number;
  /** Series label, e.g. "capture single p99". */
  series: string;
  ms: number;
}

async function renderSvg(spec: TopLevelSpec): Promise<string> {
  const view = new vega.View(vega.parse(compile(spec).spec), { renderer: 'none' });
  const svg = await view.toSVG();
  view.finalize();
  return svg;
}

const SERIES_ORDER = ['Spate', 'baseline (node:http, publish per event)', 'trivial uWS (HTTP ceiling)', 'raw JetStream publish (broker ceiling)'];

/** Grouped bars of events/s per scenario, log scale (baseline and ceilings differ by orders of magnitude). */
export async function throughputChart(path: string, title: string, bars: readonly ThroughputBar[]): Promise<void> {
  const values = bars.filter((b) => Number.isFinite(b.eventsPerSec) && b.eventsPerSec > 0);
  const spec: TopLevelSpec = {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title,
    width: { step: 110 },
    height: 320,
    data: { values: values as unknown as Record<string, unknown>[] },
    mark: { type: 'bar', tooltip: true },
    encoding: {
      x: { field: 'scenario', type: 'nominal', sort: null, axis: { labelAngle: 0, title: null } },
      xOffset: { field: 'series', sort: SERIES_ORDER },
      y: { field: 'eventsPerSec', type: 'quantitative', scale: { type: 'log' }, title: 'events/s (log scale)' },
      color: { field: 'series', type: 'nominal', sort: SERIES_ORDER, legend: { orient: 'bottom', columns: 2, title: null, labelLimit: 320 } },
    },
  };
  writeFileSync(path, await renderSvg(spec));
}

/** Latency percentiles (ms) against the offered rate (% of the maximum measured in the run). */
export async function latencyChart(path: string, title: string, points: readonly LatencyPoint[]): Promise<void> {
  const spec: TopLevelSpec = {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title,
    width: 420,
    height: 300,
    data: { values: points.filter((p) => Number.isFinite(p.ms)) as unknown as Record<string, unknown>[] },
    mark: { type: 'line', point: true, tooltip: true },
    encoding: {
      x: { field: 'percentOfMax', type: 'quantitative', title: 'offered rate, % of measured maximum', scale: { domain: [0, 100] } },
      y: { field: 'ms', type: 'quantitative', title: 'latency (ms)' },
      color: { field: 'series', type: 'nominal', legend: { orient: 'bottom', columns: 3, title: null, labelLimit: 240 } },
    },
  };
  writeFileSync(path, await renderSvg(spec));
}

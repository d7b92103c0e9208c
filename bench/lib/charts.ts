// Benchmark charts as SVG, drawn by Vega-Lite + Vega headless (pure JS: no canvas, no browser).
// They are read on a page: each fits in ~1000 px of width (test/charts.int.test.ts renders them
// in Chromium and checks their size and marks).
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

/** The powers of ten below the smallest value (strictly: every bar has a length) and at or above the largest. */
export function logDomain(values: readonly number[]): [number, number] {
  const low = 10 ** (Math.ceil(Math.log10(Math.min(...values))) - 1);
  const high = 10 ** Math.ceil(Math.log10(Math.max(...values)));
  return [low, high];
}

/**
 * Horizontal grouped bars of events/s per scenario, with each value written at the end of its
 * bar. The scale is logarithmic (the baseline and the HTTP ceiling differ by three orders of
 * magnitude), so a bar's length is measured from a fixed power of ten below every value rather
 * than from zero, which a log scale cannot show (bars drawn from zero have no length at all).
 */
export async function throughputChart(path: string, title: string, bars: readonly ThroughputBar[]): Promise<void> {
  const values = bars.filter((b) => Number.isFinite(b.eventsPerSec) && b.eventsPerSec > 0);
  if (values.length === 0) throw new Error('no throughput was measured: nothing to draw');
  const domain = logDomain(values.map((b) => b.eventsPerSec));
  const y = { field: 'scenario', type: 'nominal', sort: null, axis: { title: null, labelLimit: 140 } } as const;
  const decades: number[] = [];
  for (let v = domain[0]; v <= domain[1]; v *= 10) decades.push(v);
  const x = { field: 'eventsPerSec', type: 'quantitative', scale: { type: 'log', domain }, axis: { values: decades, format: '~s', title: 'events/s (log scale)' } } as const;
  const spec: TopLevelSpec = {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title,
    width: 640,
    // 16 px a bar; a chart of few bars (a run of one scenario) still gets a plot ~120 px tall.
    height: { step: Math.max(16, Math.ceil(120 / values.length)) },
    data: { values: values as unknown as Record<string, unknown>[] },
    encoding: { y, yOffset: { field: 'series', sort: SERIES_ORDER } },
    layer: [
      {
        mark: { type: 'bar', tooltip: true },
        encoding: {
          x,
          x2: { datum: domain[0] },
          color: { field: 'series', type: 'nominal', sort: SERIES_ORDER, legend: { orient: 'bottom', columns: 2, title: null, labelLimit: 320 } },
        },
      },
      {
        mark: { type: 'text', align: 'left', baseline: 'middle', dx: 3, fontSize: 10 },
        encoding: { x, text: { field: 'eventsPerSec', type: 'quantitative', format: '.3~s' } },
      },
    ],
  };
  writeFileSync(path, await renderSvg(spec));
}

/** Latency percentiles (ms) against the offered rate (% of the maximum measured in the run). */
export async function latencyChart(path: string, title: string, points: readonly LatencyPoint[]): Promise<void> {
  const values = points.filter((p) => Number.isFinite(p.ms));
  if (values.length === 0) throw new Error('no latency was measured: nothing to draw');
  const spec: TopLevelSpec = {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title,
    width: 480,
    height: 300,
    data: { values: values as unknown as Record<string, unknown>[] },
    mark: { type: 'line', point: true, tooltip: true },
    encoding: {
      x: { field: 'percentOfMax', type: 'quantitative', title: 'offered rate, % of measured maximum', scale: { domain: [0, 100] } },
      y: { field: 'ms', type: 'quantitative', title: 'latency (ms)' },
      color: { field: 'series', type: 'nominal', legend: { orient: 'bottom', columns: 3, title: null, labelLimit: 240 } },
    },
  };
  writeFileSync(path, await renderSvg(spec));
}

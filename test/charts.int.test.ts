// Every chart the README or a docs page shows, rendered in a real Chromium as a reader sees it:
// it draws its bars and lines (a bar of zero length is a chart that says nothing) and fits a page.
// And the committed charts are what the chart code draws from the committed figures.
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startBrowser, type BrowserHandle } from './kit/index.js';

const root = resolve(import.meta.dirname, '..');
const results = join(root, 'bench/results');
const pages = [join(root, 'README.md'), ...['docs', 'bench/results'].flatMap((dir) => markdownIn(join(root, dir)))];

function markdownIn(dir: string): string[] {
  return existsSync(dir) ? readdirSync(dir).filter((f) => f.endsWith('.md')).map((f) => join(dir, f)) : [];
}

/** The SVG images a Markdown page shows (`![alt](x.svg)` or `<img src="x.svg">`), as absolute paths. */
function chartsShownBy(page: string): string[] {
  const text = readFileSync(page, 'utf8');
  const targets = [...text.matchAll(/!\[[^\]]*\]\(([^)\s]+\.svg)\)|<img[^>]+src="([^"]+\.svg)"/g)].map((m) => m[1] ?? m[2]!);
  return targets.map((t) => resolve(dirname(page), t));
}

const shown = new Map<string, string[]>(); // chart → pages showing it
for (const page of pages) for (const chart of chartsShownBy(page)) shown.set(chart, [...(shown.get(chart) ?? []), relative(root, page)]);
const charts = [...shown.keys()].sort();

describe('charts in the docs', () => {
  let browser: BrowserHandle;
  beforeAll(async () => {
    browser = await startBrowser();
  });
  afterAll(() => browser?.close());

  it('charts - the docs show the benchmark charts, and every chart they show exists', () => {
    expect(charts.map((c) => relative(root, c))).toEqual(expect.arrayContaining([expect.stringMatching(/^bench\/results\/.+-throughput\.svg$/)]));
    for (const chart of charts) expect(existsSync(chart), `${relative(root, chart)} (shown by ${shown.get(chart)!.join(', ')})`).toBe(true);
  });

  it.each(charts.map((c) => [relative(root, c), c]))('charts - %s draws its marks at page width in Chromium', async (_name, chart) => {
    const { page, errors, close } = await browser.newPage({ width: 1000, height: 800 });
    // Inline, so its marks are elements whose drawn size Chromium reports.
    await page.setContent(`<!doctype html><html><body style="margin:0">${readFileSync(chart, 'utf8')}</body></html>`);
    const svg = (await page.locator('svg').first().boundingBox())!;
    const marks = [];
    for (const mark of await page.locator('[aria-roledescription="bar"], [aria-roledescription="line mark"]').all()) {
      const kind = (await mark.getAttribute('aria-roledescription'))!;
      const box = (await mark.boundingBox()) ?? { x: 0, y: 0, width: 0, height: 0 };
      const inside = box.x >= svg.x && box.x + box.width <= svg.x + svg.width && box.y >= svg.y && box.y + box.height <= svg.y + svg.height;
      marks.push({ kind, width: box.width, height: box.height, inside });
    }
    const drawn = { width: svg.width, height: svg.height, marks };
    expect(errors).toEqual([]);
    expect(drawn.width, 'chart width (px)').toBeLessThanOrEqual(1000);
    expect(drawn.width, 'chart width (px)').toBeGreaterThan(300);
    expect(drawn.height, 'chart height (px)').toBeGreaterThan(200);
    expect(drawn.height, 'chart height (px)').toBeLessThanOrEqual(800);
    expect(drawn.marks.length, 'bars and lines').toBeGreaterThan(0);
    for (const m of drawn.marks) {
      // A line may be flat (height 0) but not a point; a bar needs both.
      expect(m.width, `${m.kind} width`).toBeGreaterThan(1);
      if (m.kind === 'bar') expect(m.height, 'bar height').toBeGreaterThan(1);
      expect(m.inside, `${m.kind} inside the chart`).toBe(true);
    }
    const bars = drawn.marks.filter((m) => m.kind === 'bar');
    // Bars that all have one length show no comparison (every bar drawn to the edge, say).
    if (bars.length > 1) expect(new Set(bars.map((b) => Math.round(b.width))).size).toBeGreaterThan(1);
    await close();
  });

  // bench/results/ also holds JSON of other programs (bench/streams): the run over all of it skips them.
  it('charts - the committed charts are what bench/charts.ts draws from the committed figures', { timeout: 120_000 }, async () => {
    const out = mkdtempSync(join(tmpdir(), 'spate-charts-'));
    try {
      await promisify(execFile)(process.execPath, ['--import', 'tsx', join(root, 'bench/charts.ts'), '--out', out], { cwd: root });
      const committed = readdirSync(results).filter((f) => f.endsWith('.svg')).sort();
      expect(readdirSync(out).sort()).toEqual(committed);
      for (const f of committed) expect(readFileSync(join(out, f), 'utf8') === readFileSync(join(results, f), 'utf8'), `${f} is out of date: run npx tsx bench/charts.ts`).toBe(true);
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  });

  it('charts - bench/charts.ts REPORT draws that report\'s charts alone, into a --out directory it makes', { timeout: 120_000 }, async () => {
    // The one-report line of docs/benchmarks.md, with the output sent elsewhere.
    const line = readFileSync(join(root, 'docs/benchmarks.md'), 'utf8').split('\n').find((l) => /^npx tsx bench\/charts\.ts bench\/results\/\S+\.json\s/.test(l));
    expect(line).toBeDefined();
    const report = line!.split(/\s+/)[3]!;
    const out = join(mkdtempSync(join(tmpdir(), 'spate-charts-')), 'not-yet');
    try {
      await promisify(execFile)(process.execPath, ['--import', 'tsx', join(root, 'bench/charts.ts'), report, '--out', out], { cwd: root });
      const name = report.replace(/^.*\//, '').replace(/\.json$/, '');
      const drawn = readdirSync(out).sort();
      expect(drawn).toEqual(readdirSync(results).filter((f) => f.startsWith(`${name}-`) && f.endsWith('.svg')).sort());
      expect(drawn.length).toBeGreaterThan(0);
      // Another program's JSON, named: refused with the usage (in bench/results/ it is skipped).
      const other = join(dirname(out), 'other.json');
      writeFileSync(other, JSON.stringify({ run: {}, data: { streams: [] } }));
      const refused = await promisify(execFile)(process.execPath, ['--import', 'tsx', join(root, 'bench/charts.ts'), other], { cwd: root }).then(
        () => ({ code: 0, stderr: '' }),
        (err: { code: number; stderr: string }) => err,
      );
      expect(refused.code).toBe(2);
      expect(refused.stderr).toContain('not a report of npm run bench');
    } finally {
      rmSync(dirname(out), { recursive: true, force: true });
    }
  });
});

// The live cluster page as a person meets it: `npm start -- --ingest 2 --workers 2` prints its
// URL and readable log lines (SPATE_LOG_FORMAT=pretty), and the page, open in Chromium while
// events pour in, shows them coming in and being processed, the streams filling, every process
// up with the workers' shards, a batch export's runs (counted for anyone; with a personal API key,
// each run and the processes' addresses); no console error, no failed request. SPATE_LIVE_SCREENSHOT=FILE writes the screenshot there (docs/live-page.png).
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { readClusterFile, type ClusterFile } from '../../lib/index.js';
import { startBrowser, waitFor, type BrowserHandle } from '../../test/kit/index.js';

const dataDir = mkdtempSync(join(tmpdir(), 'spate-live-'));
chmodSync(dataDir, 0o711); // as root, PostgreSQL (running as `postgres`) keeps its files inside
const startScript = new URL('../start.ts', import.meta.url).pathname;
let launcher: ChildProcess | undefined;
let browser: BrowserHandle | undefined;

afterAll(async () => {
  await browser?.close();
  if (launcher?.pid && launcher.exitCode === null) {
    process.kill(-launcher.pid, 'SIGTERM');
    await new Promise((r) => launcher!.once('exit', r));
  }
  rmSync(dataDir, { recursive: true, force: true });
});

/** Sends batches of events from many distinct ids until stopped; counts what was acknowledged. */
function load(c: ClusterFile): { stop(): Promise<number> } {
  let running = true;
  let acknowledged = 0;
  const client = async (n: number) => {
    for (let i = 0; running; i++) {
      const batch = Array.from({ length: 50 }, (_, j) => ({ event: 'page viewed', distinct_id: `user-${n}-${(i * 50 + j) % 500}`, properties: { i } }));
      const res = await fetch(`${c.captureUrl}/batch/`, { method: 'POST', body: JSON.stringify({ api_key: c.projectApiKey, batch }) }).catch(() => undefined);
      if (res?.status === 200) acknowledged += batch.length;
      await res?.text();
    }
  };
  const clients = Array.from({ length: 3 }, (_, n) => client(n));
  return {
    async stop() {
      running = false;
      await Promise.all(clients);
      return acknowledged;
    },
  };
}

const text = async (page: Page, selector: string) => (await page.locator(selector).textContent())?.trim() ?? '';
const numberIn = (s: string) => Number(s.replace(/,/g, ''));
/** The cells' text of a table's body rows. */
const tableRows = (page: Page, table: string): Promise<string[][]> =>
  page.locator(`${table} tbody tr`).evaluateAll((trs) => trs.map((tr) => Array.from((tr as unknown as { cells: ArrayLike<{ textContent: string }> }).cells, (td) => td.textContent)));

describe('live cluster page', () => {
  it('live page - npm start prints it; under load it shows events in and processed, streams, processes and shards, without errors', { timeout: 300_000 }, async () => {
    launcher = spawn(process.execPath, ['--import', 'tsx', startScript, '--ingest', '2', '--workers', '2'], {
      env: { ...process.env, SPATE_DATA_DIR: dataDir, SPATE_LOG_FORMAT: 'pretty', LOG_LEVEL: 'info' },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    let output = '';
    launcher.stdout!.on('data', (d: Buffer) => (output += d.toString()));
    launcher.stderr!.on('data', (d: Buffer) => (output += d.toString()));
    await waitFor('launcher ready', () => {
      if (launcher!.exitCode !== null) throw new Error(`launcher exited:\n${output}`);
      return output.includes('[spate] ready.');
    }, 180_000, 200);
    const c = readClusterFile(join(dataDir, 'cluster.json'));

    // The ready summary names the page; the children's lines are short text, not JSON.
    expect(output).toContain(`live:     ${c.adminUrl}/`);
    expect(output).toMatch(/^\[admin\] \[\d\d:\d\d:\d\d\] INFO: admin server listening \{"url":"http:\/\/127\.0\.0\.1:\d+"\}$/m);
    expect(output).toMatch(/^\[ingest-2\] \[\d\d:\d\d:\d\d\] INFO: ingest node listening /m);
    expect(output).not.toMatch(/^\[(admin|ingest-\d|worker-\d)\] \{"level"/m);
    // Each ingest node has its own metrics port besides the shared capture port.
    const ingests = c.processes!.filter((p) => p.role === 'ingest');
    expect(new Set(ingests.map((p) => p.metricsPort)).size).toBe(2);

    browser = await startBrowser();
    const { page, errors, failedRequests, close } = await browser.newPage({ width: 1280, height: 1000 });
    await page.goto(`${c.adminUrl}/`);
    await page.waitForFunction(() => (globalThis as unknown as { document: { querySelector(s: string): { textContent: string } | null } }).document.querySelector('#status')?.textContent.startsWith('updated') === true);

    const traffic = load(c);
    try {
      await waitFor('events in and processed above zero on the page', async () => numberIn(await text(page, '#rate-in')) > 0 && numberIn(await text(page, '#rate-processed')) > 0, 60_000, 250);
      // More refreshes, so the chart has a line to draw.
      await page.waitForTimeout(12_000);

      const rows = await tableRows(page, '#processes');
      expect(rows.map((r) => [r[0], r[1]])).toEqual([
        ['ingest 1', 'up'],
        ['ingest 2', 'up'],
        ['worker 1', 'up'],
        ['worker 2', 'up'],
      ]);
      // The two workers share the 16 shards.
      const shards = rows.filter((r) => r[0]?.startsWith('worker')).flatMap((r) => (r[3] ?? '').split(', ').map(Number));
      expect(shards.sort((a, b) => a - b)).toEqual(Array.from({ length: 16 }, (_, i) => i));
      expect(await page.locator('#lag .bar').count()).toBe(16);
      const streams = await tableRows(page, '#streams');
      for (const name of ['EVENTS', 'PROCESSED']) expect(numberIn(streams.find((r) => r[0] === name)?.[1] ?? ''), name).toBeGreaterThan(0);
      // uPlot drew the chart: its canvas has a size.
      const canvas = (await page.locator('#rates-chart canvas').boundingBox())!;
      expect(canvas.width).toBeGreaterThan(600);

      // A batch export through the admin API, and a backfill of the last hour: a worker runs it.
      const api = (path: string, body: unknown) =>
        fetch(`${c.adminUrl}${path}`, { method: 'POST', headers: { authorization: `Bearer ${c.personalApiKey}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
      const created = await api(`/api/organizations/${c.organizationId}/batch_exports/`, { name: 'live page check', interval: 'hour', destination: { type: 'NoOp', config: {} } });
      expect(created.status).toBe(201);
      const exportId = ((await created.json()) as { id: string }).id;
      const hour = Math.floor(Date.now() / 3_600_000) * 3_600_000;
      const backfill = await api(`/api/organizations/${c.organizationId}/batch_exports/${exportId}/backfill/`, {
        start_at: new Date(hour - 3_600_000).toISOString(),
        end_at: new Date(hour).toISOString(),
      });
      expect(backfill.status).toBe(200);
      // Counted on the page for anyone.
      await waitFor('the export run counted', async () => (await text(page, '#export-runs-by-status')).includes('Completed 1'), 60_000, 250);
      expect(numberIn(await text(page, '#export-runs'))).toBe(1);

      // With the personal API key: the run itself and the processes' addresses.
      await page.fill('#key', c.personalApiKey ?? '');
      await page.click('#key-form button');
      await waitFor('the addresses', async () => (await page.locator('#addresses tbody tr').count()) === 4, 10_000, 100);
      expect((await tableRows(page, '#addresses'))[0]).toEqual(['ingest 1', `http://127.0.0.1:${String(ingests[0]!.metricsPort)}`]);
      const runs = await tableRows(page, '#runs');
      expect(runs).toHaveLength(1);
      expect(runs[0]!.slice(1, 4)).toEqual(['live page check', String(c.projectId), 'Completed']);

      const screenshot = join(dataDir, 'live-page.png');
      await page.screenshot({ path: screenshot, fullPage: true });
      if (process.env.SPATE_LIVE_SCREENSHOT) copyFileSync(screenshot, process.env.SPATE_LIVE_SCREENSHOT);
    } finally {
      expect(await traffic.stop()).toBeGreaterThan(0);
    }
    await close();
    expect(failedRequests).toEqual([]);
    expect(errors).toEqual([]);
  });
});

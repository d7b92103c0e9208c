// The live page's server side on a real admin server: the page and its assets, public figures
// that are numbers only (rates from a real ingest node's /metrics, stream sizes from NATS, counts
// of export runs and plugin errors from what the pipeline streams stored), and the details a
// personal API key may see. The page in a browser, under load, is in
// deploy/launcher/live-page.int.test.ts.
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_STREAM_LAYOUT, ensureStreams, pipelineSubject, toNdjson } from '../lib/index.js';
import { newBatchExport, newPluginConfig } from '../test/admin/endpoints.js';
import { startAdminFixture, type AdminFixture, type TestUser } from '../test/admin/harness.js';
import { startIngestHarness, type IngestHarness } from '../test/ingest-harness.js';
import { freePort, waitFor } from '../test/kit/index.js';
import type { Figures } from './live/index.js';

let f: AdminFixture;
let ingest: IngestHarness;
let owner: TestUser;
let stranger: TestUser;
let deadUrl: string;

beforeAll(async () => {
  ingest = await startIngestHarness({}, { phc_live: 5 });
  deadUrl = `http://127.0.0.1:${await freePort()}`;
  f = await startAdminFixture({ CLUSTER_METRICS_URLS: `${ingest.url},${deadUrl}`, LIVE_REFRESH: '200ms' });
  owner = await f.newUser('owner@live.example', { organizationName: 'Secret Org Name' });
  stranger = await f.newUser('stranger@live.example');
  // The event streams in the admin's NATS, with something in EVENTS.
  const jsm = await jetstreamManager(f.nc);
  await ensureStreams(jsm, { replicas: 1, duplicateWindowMs: 60_000, maxAgeMs: 0, maxBytes: -1 }, DEFAULT_STREAM_LAYOUT);
  await jetstream(f.nc).publish('events.1.0', '{"event":"x"}\n');
});
afterAll(async () => {
  await f?.stop();
  await ingest?.stop();
});

const figures = async (): Promise<Figures> => (await f.api('GET', '/live/figures')).body as Figures;

describe('live page (admin server)', () => {
  it('live - GET / is the page, with its script, style and uPlot from this server only', async () => {
    const page = await fetch(`${f.url}/`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toMatch(/^text\/html/);
    expect(page.headers.get('content-security-policy')).toContain("script-src 'self'");
    const html = await page.text();
    const linked = [...html.matchAll(/(?:src|href)="(\/live\/[^"]+)"/g)].map((m) => m[1]!);
    expect(linked.sort()).toEqual(['/live/live.css', '/live/live.js', '/live/uplot.css', '/live/uplot.js']);
    for (const path of linked) {
      const res = await fetch(`${f.url}${path}`);
      expect(res.status, path).toBe(200);
      expect(res.headers.get('content-type'), path).toMatch(path.endsWith('.js') ? /^application\/javascript/ : /^text\/css/);
    }
    expect(await (await fetch(`${f.url}/live/uplot.js`)).text()).toContain('uPlot');
  });

  it('live - figures: events/s from the ingest node, stream sizes, a process that does not answer is down', async () => {
    await figures();
    for (let i = 0; i < 20; i++) await fetch(`${ingest.url}/capture/`, { method: 'POST', body: JSON.stringify({ api_key: 'phc_live', event: 'e', distinct_id: `u${i}` }) });
    await new Promise((r) => setTimeout(r, 150));
    let latest!: Figures;
    await waitFor('a rate above zero', async () => {
      latest = await figures();
      return (latest.rates.in ?? 0) > 0;
    }, 10_000, 120);
    expect(latest.targets).toBe(2);
    expect(latest.processes).toEqual([
      { name: 'ingest 1', role: 'ingest', up: true, perSecond: expect.any(Number), shards: [] },
      { name: 'process 1', role: 'unknown', up: false, perSecond: null, shards: [] },
    ]);
    expect(latest.rates.processed).toBeNull(); // no worker among the targets
    expect(latest.history.length).toBeGreaterThanOrEqual(1);
    expect(latest.streams.find((s) => s.name === 'EVENTS')).toMatchObject({ messages: 1, bytes: expect.any(Number) });
    // Public figures are numbers: no organization name, key or address.
    const text = JSON.stringify(latest);
    for (const secret of ['Secret Org Name', owner.projectApiKey, owner.key, ingest.url, deadUrl]) expect(text).not.toContain(secret);
  });

  it('live - export runs and plugin errors: counts for anyone, the rows for a key that may see their project', async () => {
    const exp = await newBatchExport(f, owner, { name: 'nightly to S3' });
    const now = new Date();
    const hourAgo = new Date(now.getTime() - 3_600_000);
    await jetstream(f.nc).publish(
      pipelineSubject('batchExportRuns', owner.projectId, exp.id),
      toNdjson([{ data_interval_start: hourAgo.toISOString(), data_interval_end: now.toISOString(), status: 'Failed', latest_error: 'bucket not found', updated_at: now.toISOString() }]),
    );
    const config = await newPluginConfig(f, owner);
    await jetstream(f.nc).publish(pipelineSubject('pluginLogs', owner.projectId, config.id), toNdjson([{ type: 'ERROR', source: 'PLUGIN', message: 'processEvent threw: nope', timestamp: now.toISOString() }]));
    const theirs = await newPluginConfig(f, stranger);
    await jetstream(f.nc).publish(pipelineSubject('pluginLogs', stranger.projectId, theirs.id), toNdjson([{ type: 'ERROR', source: 'PLUGIN', message: 'not yours', timestamp: now.toISOString() }]));

    await waitFor('the counts', async () => {
      const a = (await figures()).activity;
      return a?.exportRunsByStatus.Failed === 1 && a.pluginErrorsLastHour === 2;
    }, 10_000, 150);
    expect(JSON.stringify(await figures())).not.toMatch(/nightly to S3|bucket not found|processEvent threw/);

    expect((await f.api('GET', '/live/details')).status).toBe(401);
    expect((await f.api('GET', '/live/details', { key: 'phx_not_a_key' })).status).toBe(401);
    const details = (await f.api('GET', '/live/details', { key: owner.key })).body;
    expect(details.exportRuns).toEqual([expect.objectContaining({ batch_export_name: 'nightly to S3', status: 'Failed', latest_error: 'bucket not found', team_id: owner.projectId })]);
    expect(details.pluginErrors).toEqual([expect.objectContaining({ message: 'processEvent threw: nope', plugin_config_id: config.id, team_id: owner.projectId })]);
    expect(details.processUrls).toEqual({ 'ingest 1': ingest.url, 'process 1': deadUrl });
    // A key without the scopes sees neither, and is told why.
    const narrow = await f.newKey(owner.id, ['organization:read']);
    const limited = (await f.api('GET', '/live/details', { key: narrow })).body;
    expect(limited.exportRuns).toBeUndefined();
    expect(limited.pluginErrors).toBeUndefined();
    expect(limited.notes).toHaveLength(2);
    // Another organization's member sees only their own project's error.
    expect((await f.api('GET', '/live/details', { key: stranger.key })).body).toMatchObject({ exportRuns: [], pluginErrors: [expect.objectContaining({ message: 'not yours' })] });
  });
});

// The SDKs' configuration calls on a real ingest node: remote config and feature flags in every
// shape and encoding the SDKs use, with CORS, PostHog's answers for unknown keys, and no cost to
// a project's event quota. The SDKs themselves call them in posthog-*.int.test.ts.
import { connect } from 'node:net';
import { gzipSync } from 'node:zlib';
import { runInNewContext } from 'node:vm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startIngestHarness, type IngestHarness } from '../test/ingest-harness.js';

const KEY = 'phc_config_test';
const ORIGIN = 'https://shop.example';
let h: IngestHarness;

beforeAll(async () => {
  // A small in-flight budget, so one slow capture upload can hold all of it.
  h = await startIngestHarness({ INFLIGHT_BUDGET_BYTES: '256KiB' }, { [KEY]: 7 });
});
afterAll(() => h?.stop());

async function call(path: string, init: RequestInit = {}) {
  const res = await fetch(`${h.url}${path}`, { ...init, headers: { origin: ORIGIN, ...(init.headers as Record<string, string>) } });
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, text, json: json as Record<string, unknown> };
}

const flagsBody = JSON.stringify({ token: KEY, distinct_id: 'user-1', person_properties: { plan: 'pro' } });
const post = (path: string, body: string | Uint8Array, headers: Record<string, string> = { 'content-type': 'application/json' }) => call(path, { method: 'POST', body, headers });

describe('SDK configuration calls', () => {
  it('sdk config - /array/<key>/config answers the remote config with every remote feature off, with CORS', async () => {
    for (const path of [`/array/${KEY}/config`, `/array/${KEY}/config/`]) {
      const res = await call(path);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toBe('application/json');
      expect(res.headers.get('access-control-allow-origin')).toBe(ORIGIN);
      expect(res.json).toMatchObject({
        token: KEY,
        supportedCompression: ['gzip', 'gzip-js'],
        hasFeatureFlags: false,
        sessionRecording: false,
        heatmaps: false,
        captureDeadClicks: false,
        autocaptureExceptions: false,
        siteApps: [],
      });
    }
  });

  it('sdk config - /array/<key>/config.js sets window._POSTHOG_REMOTE_CONFIG[key] when run', async () => {
    const res = await call(`/array/${KEY}/config.js`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/javascript');
    const window: { _POSTHOG_REMOTE_CONFIG?: Record<string, { config: Record<string, unknown>; siteApps: unknown[] }> } = {};
    runInNewContext(res.text, { window });
    expect(window._POSTHOG_REMOTE_CONFIG?.[KEY]?.config).toMatchObject({ token: KEY, hasFeatureFlags: false, sessionRecording: false });
    expect(window._POSTHOG_REMOTE_CONFIG?.[KEY]?.siteApps).toEqual([]);
  });

  it("sdk config - a key no project has is 404 on /array/, a key PostHog's pattern refuses is 400", async () => {
    expect((await call('/array/phc_nobody/config')).status).toBe(404);
    expect((await call('/array/phc_nobody/config.js')).status).toBe(404);
    const bad = await call(`/array/${encodeURIComponent('§$%&')}/config`);
    expect(bad.status).toBe(400);
    expect(bad.json).toMatchObject({ code: 'invalid_token', detail: 'Invalid token' });
    expect((await call(`/array/${KEY}/config`, { method: 'POST', body: '{}' })).status).toBe(405);
  });

  it('sdk config - POST /flags/?v=2 answers no flags and no errors; config=true adds the remote config', async () => {
    const plain = await post('/flags/?v=2', flagsBody);
    expect(plain.status).toBe(200);
    expect(plain.headers.get('access-control-allow-origin')).toBe(ORIGIN);
    expect(plain.json).toMatchObject({ flags: {}, errorsWhileComputingFlags: false, requestId: expect.stringMatching(/^[0-9a-f-]{36}$/), evaluatedAt: expect.any(Number) });
    expect(plain.json).not.toHaveProperty('sessionRecording');
    const withConfig = await post('/flags/?v=2&config=true', flagsBody);
    expect(withConfig.json).toMatchObject({ flags: {}, errorsWhileComputingFlags: false, sessionRecording: false, hasFeatureFlags: false, supportedCompression: ['gzip', 'gzip-js'] });
    // Neither v nor config: PostHog answers the newest shape with the config.
    expect((await post('/flags', flagsBody)).json).toMatchObject({ flags: {}, sessionRecording: false });
    // v=1: the older shape.
    expect((await post('/flags/?v=1', flagsBody)).json).toMatchObject({ featureFlags: {}, featureFlagPayloads: {}, errorsWhileComputingFlags: false });
  });

  it('sdk config - flags bodies in every encoding the SDKs send: form data= base64, gzip, plain base64', async () => {
    // posthog-js: POST /flags/?v=2&compression=base64 with a form field data=<base64 JSON>.
    const form = `data=${encodeURIComponent(Buffer.from(flagsBody).toString('base64'))}`;
    const fromForm = await post('/flags/?v=2&compression=base64', form, { 'content-type': 'application/x-www-form-urlencoded' });
    expect(fromForm.status).toBe(200);
    expect(fromForm.json).toMatchObject({ flags: {} });
    // posthog-js with gzip-js compression: gzip bytes as text/plain, by hint and by magic bytes.
    const gz = gzipSync(flagsBody);
    expect((await post('/flags/?v=2&compression=gzip-js', gz, { 'content-type': 'text/plain' })).json).toMatchObject({ flags: {} });
    expect((await post('/flags/?v=2', gz, { 'content-type': 'text/plain' })).json).toMatchObject({ flags: {} });
    expect((await post('/flags/?v=2', gz, { 'content-type': 'application/json', 'content-encoding': 'gzip' })).json).toMatchObject({ flags: {} });
    // Base64 without a form (older SDKs).
    expect((await post('/flags/?v=2&compression=base64', Buffer.from(flagsBody).toString('base64'), { 'content-type': 'text/plain' })).json).toMatchObject({ flags: {} });
  });

  it('sdk config - /decide/ answers the shape of its version, always with the config', async () => {
    const v3 = await post('/decide/?v=3', flagsBody);
    expect(v3.status).toBe(200);
    expect(v3.json).toMatchObject({
      featureFlags: {},
      featureFlagPayloads: {},
      errorsWhileComputingFlags: false,
      sessionRecording: false,
      config: { enable_collect_everything: true },
      supportedCompression: ['gzip', 'gzip-js'],
    });
    expect((await post('/decide/?v=4', flagsBody)).json).toMatchObject({ flags: {}, sessionRecording: false });
    expect((await post('/decide/?v=2', flagsBody)).json).toMatchObject({ featureFlags: {} });
    expect((await post('/decide', flagsBody)).json).toMatchObject({ featureFlags: [] });
  });

  it("sdk config - PostHog's refusals: unknown key 401, no key 401, no distinct_id 400, bad JSON 400, too large 413", async () => {
    const unknown = await post('/flags/?v=2', JSON.stringify({ token: 'phc_nobody', distinct_id: 'u' }));
    expect(unknown.status).toBe(401);
    expect(unknown.json).toMatchObject({ code: 'unknown_api_key' });
    expect((await post('/flags/?v=2', JSON.stringify({ distinct_id: 'u' }))).json).toMatchObject({ code: 'missing_api_key' });
    const noId = await post('/flags/?v=2', JSON.stringify({ token: KEY }));
    expect(noId.status).toBe(400);
    expect(noId.json).toMatchObject({ code: 'missing_distinct_id' });
    expect((await post('/flags/?v=2', JSON.stringify({ token: KEY, distinct_id: '' }))).status).toBe(400);
    expect((await post('/flags/?v=2', '{"token":')).json).toMatchObject({ code: 'invalid_json' });
    const huge = JSON.stringify({ token: KEY, distinct_id: 'u', person_properties: { blob: 'x'.repeat(70_000) } });
    expect((await post('/flags/?v=2', huge)).status).toBe(413);
    // A gzip that decodes past the limit is refused too, not decoded whole.
    expect((await post('/flags/?v=2', gzipSync(huge), { 'content-type': 'text/plain' })).status).toBe(413);
  });

  it('sdk config - GET /flags/ answers a minimal answer, OPTIONS is a CORS preflight', async () => {
    const get = await call('/flags/?v=2');
    expect(get.status).toBe(200);
    expect(get.json).toMatchObject({ flags: {}, errorsWhileComputingFlags: false, sessionRecording: false });
    const preflight = await call('/flags/?v=2', { method: 'OPTIONS', headers: { 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type' } });
    expect(preflight.status).toBe(200);
    expect(preflight.headers.get('access-control-allow-origin')).toBe(ORIGIN);
    expect(preflight.headers.get('access-control-allow-methods')).toContain('POST');
    expect(preflight.headers.get('access-control-allow-headers')).toBe('content-type');
    expect((await call('/flags/', { method: 'DELETE' })).status).toBe(405);
  });

  it('sdk config - configuration calls publish nothing and count against no event quota', async () => {
    const key = 'phc_quota_config';
    await h.kv.put(key, JSON.stringify({ projectId: 8, organizationId: 'org-test', limits: { eventsPerDay: 1 } }));
    await expect.poll(async () => (await call(`/array/${key}/config`)).status).toBe(200);
    const before = await h.totalMessages();
    for (let i = 0; i < 20; i++) {
      expect((await post('/flags/?v=2', JSON.stringify({ token: key, distinct_id: `u${i}` }))).status).toBe(200);
      expect((await call(`/array/${key}/config`)).status).toBe(200);
    }
    expect(await h.totalMessages()).toBe(before);
    // The day's one event is still there to take.
    expect((await post('/capture/', JSON.stringify({ api_key: key, event: 'after flags', distinct_id: 'u' }))).status).toBe(200);
    const landed = (await h.events('events')).filter((e) => e.token === key);
    expect(landed.map((e) => e.event)).toEqual(['after flags']);
    expect(await h.metric('spate_ingest_requests_total', { route: 'flags', status: '200' })).toBeGreaterThanOrEqual(20);
  });

  it("sdk config - flags calls answer while capture bodies hold the node's whole in-flight budget", async () => {
    // A capture upload that has sent 300 KiB of a declared 1 MiB and waits: its bytes hold the budget.
    const socket = connect(new URL(h.url).port === '' ? 80 : Number(new URL(h.url).port), '127.0.0.1');
    await new Promise((resolve) => socket.once('connect', resolve));
    socket.write(`POST /batch/ HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${1024 * 1024}\r\n\r\n`);
    socket.write(Buffer.alloc(300 * 1024, 0x20));
    await expect.poll(() => h.metric('spate_ingest_inflight_bytes')).toBeGreaterThanOrEqual(256 * 1024);
    // A capture now is refused for want of budget; a flags call is not.
    expect((await post('/capture/', JSON.stringify({ api_key: KEY, event: 'e', distinct_id: 'u', properties: { pad: 'x'.repeat(8_000) } }))).status).toBe(503);
    expect((await post('/flags/?v=2', flagsBody)).status).toBe(200);
    expect((await post('/flags/?v=2&compression=gzip-js', gzipSync(flagsBody), { 'content-type': 'text/plain' })).status).toBe(200);
    socket.destroy();
  });
});

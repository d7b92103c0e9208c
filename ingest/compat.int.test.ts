// Replays spec/posthog-requests-dump.jsonl (real SDK requests: form/base64, gzip with and
// without the hint, posthog-node batches, a historical migration) and checks every event the
// dump says the request must produce.
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CapturedEvent } from '../lib/index.js';
import { post, startIngestHarness, type IngestHarness } from '../test/ingest-harness.js';

interface DumpCase {
  path: string;
  method: string;
  content_encoding: string;
  content_type: string;
  ip: string;
  now: string;
  body: string;
  output: { uuid: string; distinct_id: string; ip: string; now: string; sent_at: string; token: string; data: string }[];
  historical_migration?: boolean;
}

const dumpPath = new URL('../../shared/spec/posthog-requests-dump.jsonl', import.meta.url);
const cases: DumpCase[] = readFileSync(dumpPath, 'utf8')
  .split('\n')
  .filter((l) => l.trim() && !l.startsWith('#'))
  .map((l) => JSON.parse(l) as DumpCase);

/** The timestamp capture must compute for `data`, relative to the node's own `now`. */
function expectedTimestamp(data: Record<string, unknown>, sentAt: string, nowMs: number): number {
  if (typeof data.offset === 'number') return nowMs - data.offset;
  const props = (data.properties ?? {}) as Record<string, unknown>;
  if (typeof data.timestamp === 'string') {
    const ts = Date.parse(data.timestamp);
    if (sentAt && props.$ignore_sent_at !== true) return nowMs + (ts - Date.parse(sentAt));
    return ts;
  }
  return nowMs;
}

describe('compat - PostHog SDK request corpus', () => {
  let h: IngestHarness;
  beforeAll(async () => {
    const tokens = new Set(cases.flatMap((c) => c.output.map((o) => o.token)));
    h = await startIngestHarness({ TRUST_PROXY: 'true', SPIKE_EVENTS_PER_SECOND: '0' }, Object.fromEntries([...tokens].map((t) => [t, 1])));
  });
  afterAll(() => h.stop());

  it('compat - the corpus has the cases the issue names', () => {
    expect(cases.length).toBeGreaterThanOrEqual(15);
    expect(cases.some((c) => c.content_type === 'application/x-www-form-urlencoded')).toBe(true);
    expect(cases.some((c) => !c.path.includes('compression') && Buffer.from(c.body, 'base64')[0] === 0x1f)).toBe(true);
    expect(cases.some((c) => c.historical_migration)).toBe(true);
  });

  cases.forEach((c, index) => {
    it(`compat - case ${index + 1}: ${c.method} ${c.path} (${c.content_type}) yields its ${c.output.length} event(s)`, async () => {
      const kind = c.historical_migration ? 'historical' : 'events';
      const before = await h.events(kind);
      const headers: Record<string, string> = { 'content-type': c.content_type, 'x-forwarded-for': c.ip };
      if (c.content_encoding) headers['content-encoding'] = c.content_encoding;
      const res = await post(`${h.url}${c.path}`, Buffer.from(c.body, 'base64'), headers);
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({ status: 1 });

      const after = await h.events(kind);
      // Some cases repeat an earlier request (same uuids): compare what this request added.
      const produced = after.slice(before.length);
      const byUuid = new Map<string, CapturedEvent>(produced.map((e) => [e.uuid, e]));
      for (const expected of c.output) {
        const data = JSON.parse(expected.data) as Record<string, unknown>;
        const got = byUuid.get(expected.uuid);
        expect(got, `event ${expected.uuid}`).toBeDefined();
        expect(got!.event).toBe(data.event);
        expect(got!.distinct_id).toBe(expected.distinct_id);
        expect(got!.properties).toEqual(data.properties ?? {});
        expect(got!.token).toBe(expected.token);
        expect(got!.ip).toBe(expected.ip);
        expect(got!.project_id).toBe(1);
        if (expected.sent_at) expect(Date.parse(got!.sent_at!)).toBe(Date.parse(expected.sent_at));
        else expect(got!.sent_at).toBeUndefined();
        if (data.$set !== undefined) expect(got!.$set).toEqual(data.$set);
        if (data.$set_once !== undefined) expect(got!.$set_once).toEqual(data.$set_once);
        const nowMs = Date.parse(got!.now);
        expect(Math.abs(nowMs - Date.now())).toBeLessThan(60_000);
        expect(Date.parse(got!.timestamp)).toBe(expectedTimestamp(data, expected.sent_at, nowMs));
      }
      // Exactly the expected events, once each.
      expect(produced.map((e) => e.uuid).sort()).toEqual(c.output.map((o) => o.uuid).sort());
    });
  });

  it('compat - the historical case landed in HISTORICAL and nowhere else', async () => {
    const historical = cases.find((c) => c.historical_migration)!;
    const inHistorical = new Set((await h.events('historical')).map((e) => e.uuid));
    const inEvents = new Set((await h.events('events')).map((e) => e.uuid));
    for (const o of historical.output) {
      expect(inHistorical.has(o.uuid)).toBe(true);
      expect(inEvents.has(o.uuid)).toBe(false);
    }
  });
});

// Plugin logs: workers publish entries on PLUGIN_LOGS; the admin server stores them in batches
// (at least once, idempotently) and serves them newest first with filters and pagination.
import { randomUUID } from 'node:crypto';
import { jetstream } from '@nats-io/jetstream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger, pipelineSubject, toNdjson, type PluginLogLine } from '../lib/index.js';
import { newPluginConfig } from '../test/admin/endpoints.js';
import { startAdminFixture, type AdminFixture, type TestUser } from '../test/admin/harness.js';
import { waitFor } from '../test/kit/index.js';
import { startAdmin } from './index.js';
import { deleteOldLogEntries } from './log-retention.js';
import { paginatedPluginLogs } from './pipeline-schemas.js';

let f: AdminFixture;
let owner: TestUser;

beforeAll(async () => {
  f = await startAdminFixture();
  owner = await f.newUser('owner@logs.example');
});
afterAll(async () => f?.stop());

const TYPES = ['DEBUG', 'LOG', 'INFO', 'WARN', 'ERROR'] as const;
const SOURCES = ['SYSTEM', 'PLUGIN', 'CONSOLE'] as const;
const T0 = Date.UTC(2024, 0, 1);

/** Publishes lines in messages of `perMessage` lines, `inFlight` publishes at a time. */
async function publish(subject: string, lines: readonly unknown[], perMessage: number, inFlight = 64): Promise<void> {
  const js = jetstream(f.nc);
  const pending = new Set<Promise<unknown>>();
  for (let i = 0; i < lines.length; i += perMessage) {
    const p = js.publish(subject, toNdjson(lines.slice(i, i + perMessage)));
    pending.add(p);
    void p.finally(() => pending.delete(p));
    if (pending.size >= inFlight) await Promise.race(pending);
  }
  await Promise.all(pending);
}

async function storedCount(configId: number): Promise<number> {
  return (await f.db.query('select count(*)::int as n from plugin_log_entries where plugin_config_id = $1', [configId])).rows[0].n;
}

describe('plugin logs', () => {
  it('plugin logs - 100k entries through NATS are all stored once; filters and pagination are right afterwards', async () => {
    const { id: configId, plugin } = await newPluginConfig(f, owner);
    const other = await newPluginConfig(f, owner);
    const subject = pipelineSubject('pluginLogs', owner.projectId, configId);
    const N = 100_000;
    const entries: Array<PluginLogLine & { id: string; timestamp: string }> = Array.from({ length: N }, (_, i) => ({
      id: randomUUID(),
      // One entry per second; a few share a timestamp with their neighbour (the id breaks the tie).
      timestamp: new Date(T0 + Math.floor(i / 4) * 4000 + (i % 4 === 3 ? 0 : (i % 4) * 1000)).toISOString(),
      source: SOURCES[i % 3],
      type: TYPES[i % 5],
      message: i % 1000 === 0 ? `Found the NeEdLe in entry ${i}` : i % 997 === 0 ? `100%_done ${i}` : `processed event ${i}`,
      instance_id: '0190f3c4-0000-7000-8000-00000000000a',
    }));

    // Measure how the API answers while the burst is being stored.
    let probing = true;
    let slowest = 0;
    const probes = (async () => {
      while (probing) {
        const t = Date.now();
        expect((await f.api('GET', '/api/organizations/', { key: owner.key })).status).toBe(200);
        slowest = Math.max(slowest, Date.now() - t);
        await new Promise((r) => setTimeout(r, 50));
      }
    })();

    const started = Date.now();
    // Most in large messages, some one line per message, and 2,000 sent twice (a worker's retry).
    await publish(subject, entries.slice(0, 90_000), 500);
    await publish(subject, entries.slice(90_000, 95_000), 1);
    await publish(subject, entries.slice(95_000), 100);
    await publish(subject, entries.slice(10_000, 12_000), 250);
    await publish(pipelineSubject('pluginLogs', owner.projectId, other.id), entries.slice(0, 10).map((e) => ({ ...e, id: randomUUID() })), 10);
    const published = Date.now();
    await waitFor('100k entries stored', async () => (await storedCount(configId)) >= N, 120_000, 200);
    const stored = Date.now();
    probing = false;
    await probes;
    console.log(`plugin logs: published 100k in ${published - started} ms, all stored ${stored - started} ms after the first publish; slowest API answer meanwhile ${slowest} ms`);
    expect(slowest).toBeLessThan(3_000);

    await new Promise((r) => setTimeout(r, 500));
    expect(await storedCount(configId)).toBe(N);
    expect(await storedCount(other.id)).toBe(10);
    const distinct = (await f.db.query('select count(distinct id)::int as n, min(plugin_id) as p, max(team_id) as t from plugin_log_entries where plugin_config_id = $1', [configId])).rows[0];
    expect(distinct).toEqual({ n: N, p: plugin, t: owner.projectId });

    const base = `/api/projects/${owner.projectId}/plugin_configs/${configId}/logs/`;
    const get = async (query: string) => {
      const res = await f.api('GET', `${base}${query}`, { key: owner.key });
      expect(res.status, `${query}: ${res.text.slice(0, 200)}`).toBe(200);
      return paginatedPluginLogs.parse(res.body);
    };

    // Newest first, ties broken by id; a walk over every page sees every entry once.
    const first = await get('');
    expect(first.count).toBe(N);
    expect(first.results).toHaveLength(100);
    const desc = (a: string, b: string) => (a < b ? 1 : a > b ? -1 : 0);
    const newest = [...entries].sort((a, b) => desc(a.timestamp, b.timestamp) || desc(a.id, b.id));
    expect(first.results.map((e) => e.id)).toEqual(newest.slice(0, 100).map((e) => e.id));
    expect(first.results[0]).toEqual({
      id: newest[0]!.id,
      team_id: owner.projectId,
      plugin_id: plugin,
      plugin_config_id: configId,
      timestamp: newest[0]!.timestamp,
      source: newest[0]!.source,
      type: newest[0]!.type,
      message: newest[0]!.message,
      instance_id: '0190f3c4-0000-7000-8000-00000000000a',
    });
    const seen: string[] = [];
    let url: string | null = `${f.url}${base}?limit=10000`;
    while (url) {
      const page = paginatedPluginLogs.parse((await f.api('GET', url, { key: owner.key })).body);
      seen.push(...page.results.map((e) => e.id));
      url = page.next;
    }
    expect(seen).toEqual(newest.map((e) => e.id));

    const count = (pred: (e: (typeof entries)[number]) => boolean) => entries.filter(pred).length;
    expect((await get('?type_filter=ERROR')).count).toBe(count((e) => e.type === 'ERROR'));
    const errorsAndWarnings = await get('?type_filter=ERROR&type_filter=WARN&limit=50&offset=100');
    expect(errorsAndWarnings.count).toBe(count((e) => e.type === 'ERROR' || e.type === 'WARN'));
    expect(errorsAndWarnings.results.map((e) => e.id)).toEqual(newest.filter((e) => e.type === 'ERROR' || e.type === 'WARN').slice(100, 150).map((e) => e.id));
    expect(errorsAndWarnings.next).toBe(`${f.url}${base}?limit=50&offset=150&type_filter=ERROR&type_filter=WARN`);
    const needles = await get('?search=needle');
    expect(needles.count).toBe(100);
    expect(needles.results.every((e) => e.message.includes('NeEdLe'))).toBe(true);
    expect((await get('?search=100%25_done')).count).toBe(count((e) => e.message.includes('100%_done')));
    expect((await get('?search=0%25_')).count).toBe(count((e) => e.message.includes('0%_')));
    const after = new Date(T0 + 50_000 * 1000).toISOString();
    const before = new Date(T0 + 60_000 * 1000).toISOString();
    const window = await get(`?after=${after}&before=${before}&type_filter=INFO`);
    expect(window.count).toBe(count((e) => e.timestamp > after && e.timestamp < before && e.type === 'INFO'));
    expect(window.count).toBeGreaterThan(1_000);
    expect((await get(`?after=${encodeURIComponent('2024-01-01T00:00:10+00:00')}&before=2024-01-01T00:00:20`)).count).toBe(
      count((e) => e.timestamp > '2024-01-01T00:00:10.000Z' && e.timestamp < '2024-01-01T00:00:20.000Z'),
    );
    expect((await get('?search=nothing-like-this')).count).toBe(0);

    const bad = await f.api('GET', `${base}?type_filter=FATAL`, { key: owner.key });
    expect(bad.status).toBe(400);
    expect(bad.body).toEqual({ type: 'validation_error', code: 'validation_error', detail: '"FATAL" is not a valid choice.', attr: 'type_filter' });
    const badTime = await f.api('GET', `${base}?after=yesterday`, { key: owner.key });
    expect(badTime.body).toEqual({
      type: 'validation_error',
      code: 'validation_error',
      detail: 'Datetime has wrong format. Use one of these formats instead: YYYY-MM-DDThh:mm[:ss[.uuuuuu]][+HH:MM|-HH:MM|Z].',
      attr: 'after',
    });
  }, 300_000);

  it('plugin logs - defaults, invalid lines, unknown configs and NUL characters', async () => {
    const config = await newPluginConfig(f, owner);
    const stranger = await f.newUser('stranger@logs.example');
    const theirs = await newPluginConfig(f, stranger);
    const subject = pipelineSubject('pluginLogs', owner.projectId, config.id);
    const js = jetstream(f.nc);
    await js.publish(
      subject,
      [
        JSON.stringify({ message: 'defaults' }),
        JSON.stringify({ message: 'nul \u0000 inside', type: 'WARN', source: 'CONSOLE' }),
        'not json',
        JSON.stringify({ message: 5 }),
        JSON.stringify({ message: 'x', type: 'FATAL' }),
        JSON.stringify({ message: 'x', source: 'KERNEL' }),
        JSON.stringify({ message: 'x', id: 'not-a-uuid' }),
        JSON.stringify({ message: 'x', timestamp: '2024-02-30T00:00:00Z' }),
        JSON.stringify({ message: 'x', instance_id: 'abc' }),
        '',
      ].join('\n'),
    );
    // Another project's config named under this project, an unknown config, a malformed subject.
    await js.publish(pipelineSubject('pluginLogs', owner.projectId, theirs.id), toNdjson([{ message: 'wrong team' }]));
    await js.publish(pipelineSubject('pluginLogs', owner.projectId, 999_999), toNdjson([{ message: 'no such config' }]));
    await js.publish(`plugin_logs.${owner.projectId}.abc`, toNdjson([{ message: 'bad subject' }]));
    await waitFor('two entries', async () => (await storedCount(config.id)) === 2, 10_000);
    const rows = (await f.db.query('select source, type, message, instance_id, timestamp from plugin_log_entries where plugin_config_id = $1 order by message', [config.id])).rows;
    expect(rows.map((r) => [r.source, r.type, r.message, r.instance_id])).toEqual([
      ['PLUGIN', 'INFO', 'defaults', null],
      ['CONSOLE', 'WARN', 'nul \uFFFD inside', null],
    ]);
    expect(Math.abs(rows[0].timestamp.getTime() - Date.now())).toBeLessThan(60_000);
    expect(await storedCount(theirs.id)).toBe(0);
    const metrics = (await f.api('GET', '/metrics')).text;
    expect(metrics).toMatch(/spate_admin_stream_lines_total\{[^}]*sink="plugin_logs"[^}]*outcome="invalid"[^}]*\} ([89]|\d{2,})/);
  });

  it('plugin logs - one message of 150,000 lines (ids derived from its place in the stream) is stored whole', async () => {
    const config = await newPluginConfig(f, owner);
    const body = '{"message":"m","type":"DEBUG"}\n'.repeat(150_000);
    await jetstream(f.nc).publish(pipelineSubject('pluginLogs', owner.projectId, config.id), body);
    await waitFor('150k stored', async () => (await storedCount(config.id)) === 150_000, 60_000, 200);
  }, 90_000);

  it('plugin logs - PostgreSQL refusing writes delays storage but loses nothing', async () => {
    const config = await newPluginConfig(f, owner);
    const subject = pipelineSubject('pluginLogs', owner.projectId, config.id);
    await f.db.query('alter table plugin_log_entries rename to plugin_log_entries_away');
    try {
      await publish(subject, Array.from({ length: 3_000 }, (_, i) => ({ id: randomUUID(), message: `during outage ${i}` })), 100);
      await new Promise((r) => setTimeout(r, 1_500));
    } finally {
      await f.db.query('alter table plugin_log_entries_away rename to plugin_log_entries');
    }
    await waitFor('stored after the outage', async () => (await storedCount(config.id)) === 3_000, 60_000, 200);
  }, 90_000);

  it('plugin logs - LOG_RETENTION deletes entries older than the retention, plugin and batch export logs alike', async () => {
    const config = await newPluginConfig(f, owner);
    const old = new Date(Date.now() - 20 * 86_400_000);
    const recent = new Date(Date.now() - 86_400_000);
    await f.db.query(
      `insert into plugin_log_entries (id, team_id, plugin_id, plugin_config_id, timestamp, source, type, message)
       select gen_random_uuid(), $1, $2, $3, case when i % 2 = 0 then $4::timestamptz else $5::timestamptz end, 'PLUGIN', 'INFO', 'm'
       from generate_series(1, 25000) i`,
      [owner.projectId, config.plugin, config.id, old, recent],
    );
    await f.db.query(
      `insert into batch_export_log_entries (id, team_id, batch_export_id, timestamp, level, message)
       values (gen_random_uuid(), $1, gen_random_uuid(), $2, 'INFO', 'old'), (gen_random_uuid(), $1, gen_random_uuid(), $3, 'INFO', 'new')`,
      [owner.projectId, old, recent],
    );
    const before = (await f.db.query('select count(*)::int as n from batch_export_log_entries')).rows[0].n;
    expect(await deleteOldLogEntries(f.db, 14 * 86_400_000)).toBeGreaterThanOrEqual(12_501);
    expect(await storedCount(config.id)).toBe(12_500);
    expect((await f.db.query('select count(*)::int as n from batch_export_log_entries')).rows[0].n).toBe(before - 1);
    expect(await deleteOldLogEntries(f.db, 14 * 86_400_000)).toBe(0);
  });

  it('plugin logs - two admin replicas share the stream: every entry stored exactly once', async () => {
    const second = await startAdmin(f.config, { logger: createLogger('admin-test', 'silent') });
    try {
      const config = await newPluginConfig(f, owner);
      const subject = pipelineSubject('pluginLogs', owner.projectId, config.id);
      await publish(subject, Array.from({ length: 20_000 }, (_, i) => ({ id: randomUUID(), message: `shared ${i}` })), 1, 256);
      await waitFor('20k stored', async () => (await storedCount(config.id)) >= 20_000, 120_000, 200);
      await new Promise((r) => setTimeout(r, 500));
      expect(await storedCount(config.id)).toBe(20_000);
    } finally {
      await second.stop();
    }
  }, 180_000);
});

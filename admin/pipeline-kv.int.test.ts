// The KV buckets workers watch: spate-batch-exports and spate-plugin-configs reflect every change
// within a second (through the request, through LISTEN for changes made elsewhere), and are
// reconciled at start; requests for workers survive a NATS outage (outbox).
import { createHash } from 'node:crypto';
import { AckPolicy, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { Kvm, KvWatchInclude, type KV } from '@nats-io/kv';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BATCH_EXPORTS_BUCKET, createLogger, decryptConfigSecrets, PLUGIN_CONFIGS_BUCKET, PLUGIN_SOURCES_BUCKET, secretContext, type BatchExportRecord, type PluginConfigsRecord } from '../lib/index.js';
import { newBatchExport, newPlugin } from '../test/admin/endpoints.js';
import { startAdminFixture, type AdminFixture, type TestUser } from '../test/admin/harness.js';
import { testSecretKeyring, waitFor } from '../test/kit/index.js';
import { startAdmin } from './index.js';

let f: AdminFixture;
let owner: TestUser;

beforeAll(async () => {
  f = await startAdminFixture();
  owner = await f.newUser('owner@kv.example');
});
afterAll(async () => f?.stop());

interface Seen {
  key: string;
  op: string;
  value: unknown;
  at: number;
}

/** Records every change of a bucket from now on. */
async function watchBucket(bucket: string): Promise<{ seen: Seen[]; stop: () => void; kv: KV }> {
  const kv = await new Kvm(f.nc).open(bucket);
  const watch = await kv.watch({ include: KvWatchInclude.UpdatesOnly });
  const seen: Seen[] = [];
  void (async () => {
    for await (const e of watch) seen.push({ key: e.key, op: e.operation, value: e.operation === 'PUT' ? e.json() : undefined, at: Date.now() });
  })();
  return { seen, stop: () => watch.stop(), kv };
}

/** Runs `change` and waits (at most a second from its start) until the watcher sees `expected`. */
async function withinASecond(seen: Seen[], change: () => Promise<unknown>, expected: (s: Seen) => boolean, what: string): Promise<Seen> {
  const from = seen.length;
  const started = Date.now();
  await change();
  await waitFor(what, () => seen.slice(from).some(expected), 1_000, 5);
  const hit = seen.slice(from).find(expected)!;
  expect(hit.at - started, what).toBeLessThan(1_000);
  return hit;
}

/** A config from a KV record with its secrets decrypted, as a worker does. */
function decrypted(config: Record<string, unknown>, kind: 'batch_export' | 'plugin_config', teamId: number): Record<string, unknown> {
  return decryptConfigSecrets(config, testSecretKeyring(), (field) => secretContext(kind, teamId, field));
}

async function kvValue(bucket: string, key: string): Promise<unknown> {
  const entry = await (await new Kvm(f.nc).open(bucket)).get(key);
  return entry?.operation === 'PUT' ? entry.json() : undefined;
}

describe('pipeline KV buckets', () => {
  it('kv - spate-batch-exports follows create, update, pause, unpause and delete within a second (secrets included)', async () => {
    const { seen, stop } = await watchBucket(BATCH_EXPORTS_BUCKET);
    const base = `/api/organizations/${owner.organizationId}/batch_exports/`;
    let id = '';
    const created = await withinASecond(
      seen,
      async () => {
        const res = await f.api('POST', base, {
          key: owner.key,
          body: { name: 'KV', interval: 'hour', destination: { type: 'HTTP', config: { url: 'https://x', token: 'tok' } }, start_at: '2024-01-01T00:00:00Z' },
        });
        id = res.body.id;
      },
      (s) => s.key === id && s.op === 'PUT',
      'export created',
    );
    expect(created.value).toEqual({
      id,
      team_id: owner.projectId,
      name: 'KV',
      model: 'events',
      interval: 'hour',
      interval_seconds: 3600,
      paused: false,
      start_at: '2024-01-01T00:00:00.000Z',
      end_at: null,
      hogql_query: null,
      // The token under its name, encrypted (a worker decrypts it).
      destination: { type: 'HTTP', config: { url: 'https://x', token: { $encrypted: expect.stringMatching(/^v1:/) } } },
      last_updated_at: expect.any(String),
    } satisfies Record<keyof BatchExportRecord, unknown>);
    expect(decrypted((created.value as BatchExportRecord).destination.config, 'batch_export', owner.projectId)).toEqual({ url: 'https://x', token: 'tok' });
    const updated = await withinASecond(
      seen,
      () => f.api('PATCH', `${base}${id}/`, { key: owner.key, body: { interval: 'day', destination: { config: { token: 'rotated' } } } }),
      (s) => s.key === id && (s.value as BatchExportRecord | undefined)?.interval === 'day',
      'export updated',
    );
    expect(decrypted((updated.value as BatchExportRecord).destination.config, 'batch_export', owner.projectId)).toEqual({ url: 'https://x', token: 'rotated' });
    await withinASecond(seen, () => f.api('POST', `${base}${id}/pause/`, { key: owner.key }), (s) => s.key === id && (s.value as BatchExportRecord | undefined)?.paused === true, 'paused');
    await withinASecond(seen, () => f.api('POST', `${base}${id}/unpause/`, { key: owner.key }), (s) => s.key === id && (s.value as BatchExportRecord | undefined)?.paused === false, 'unpaused');
    await withinASecond(seen, () => f.api('DELETE', `${base}${id}/`, { key: owner.key }), (s) => s.key === id && s.op !== 'PUT', 'deleted');
    expect(await kvValue(BATCH_EXPORTS_BUCKET, id)).toBeUndefined();
    stop();
  });

  it('kv - spate-plugin-configs holds each project’s enabled configs in order and follows every change within a second', async () => {
    const u = await f.newUser('configs@kv.example');
    const key = String(u.projectId);
    const { seen, stop } = await watchBucket(PLUGIN_CONFIGS_BUCKET);
    const plugin = await newPlugin(f, u, 'pipeline_transformations', { name: 'Geo', config_schema: [{ key: 'k', secret: true }] });
    const configs = `/api/projects/${u.projectId}/plugin_configs/`;
    const record = (s: Seen) => s.value as PluginConfigsRecord | undefined;
    let a = 0;
    let b = 0;
    const first = await withinASecond(
      seen,
      async () => (a = (await f.api('POST', configs, { key: u.key, body: { plugin: plugin.id, order: 2, enabled: true, config: { k: 'secret' } } })).body.id),
      (s) => s.key === key && s.op === 'PUT',
      'enabled config',
    );
    expect(first.value).toEqual({
      team_id: u.projectId,
      configs: [
        {
          id: a,
          plugin_id: plugin.id,
          order: 2,
          config: { k: { $encrypted: expect.stringMatching(/^v1:/) } },
          plugin: { name: 'Geo', plugin_type: 'source', url: null, tag: null, capabilities: { methods: ['processEvent'] }, updated_at: expect.any(String), source_hash: null },
          updated_at: expect.any(String),
        },
      ],
    });
    await withinASecond(
      seen,
      async () => (b = (await f.api('POST', configs, { key: u.key, body: { plugin: plugin.id, order: 1, enabled: true } })).body.id),
      (s) => s.key === key && record(s)?.configs.length === 2,
      'second config',
    );
    expect((await kvValue(PLUGIN_CONFIGS_BUCKET, key) as PluginConfigsRecord).configs.map((c) => c.id)).toEqual([b, a]);
    await withinASecond(
      seen,
      () => f.api('PATCH', `${configs}rearrange/`, { key: u.key, body: { orders: { [a]: 0 } } }),
      (s) => s.key === key && record(s)?.configs[0]?.id === a,
      'rearranged',
    );
    await withinASecond(
      seen,
      () => f.api('PATCH', `${configs}${a}/`, { key: u.key, body: { config: { k: null, extra: 'x' } } }),
      (s) => s.key === key && record(s)?.configs.find((c) => c.id === a)?.config.extra === 'x',
      'config changed',
    );
    const kept = (await kvValue(PLUGIN_CONFIGS_BUCKET, key) as PluginConfigsRecord).configs.find((c) => c.id === a)!.config;
    expect(decrypted(kept, 'plugin_config', u.projectId)).toEqual({ k: 'secret', extra: 'x' });
    await withinASecond(
      seen,
      () => f.api('PATCH', `/api/organizations/${u.organizationId}/pipeline_transformations/${plugin.id}/`, { key: u.key, body: { name: 'Geo v2' } }),
      (s) => s.key === key && record(s)?.configs.every((c) => c.plugin.name === 'Geo v2') === true,
      'plugin renamed',
    );
    await withinASecond(seen, () => f.api('PATCH', `${configs}${a}/`, { key: u.key, body: { enabled: false } }), (s) => s.key === key && record(s)?.configs.length === 1, 'disabled');
    await withinASecond(seen, () => f.api('DELETE', `${configs}${b}/`, { key: u.key }), (s) => s.key === key && s.op !== 'PUT', 'last one deleted');
    stop();
  });

  it('kv - spate-plugin-sources holds each plugin’s compiled code by its hash, which the configs’ records name', async () => {
    const u = await f.newUser('sources@kv.example');
    const key = String(u.projectId);
    const sources = await new Kvm(f.nc).open(PLUGIN_SOURCES_BUCKET);
    const order: string[] = [];
    const watches = [await sources.watch({ include: KvWatchInclude.UpdatesOnly }), await (await new Kvm(f.nc).open(PLUGIN_CONFIGS_BUCKET)).watch({ include: KvWatchInclude.UpdatesOnly })];
    for (const [i, watch] of watches.entries()) {
      void (async () => {
        for await (const e of watch) order.push(`${i === 0 ? 'source' : 'config'} ${e.operation} ${e.key}`);
      })();
    }
    const plugin = await newPlugin(f, u, 'pipeline_transformations', { name: 'Coded' });
    const config = (await f.api('POST', `/api/projects/${u.projectId}/plugin_configs/`, { key: u.key, body: { plugin: plugin.id, order: 1, enabled: true } })).body;
    const path = `/api/organizations/${u.organizationId}/pipeline_transformations/${plugin.id}/update_source/`;
    expect((await f.api('PATCH', path, { key: u.key, body: { 'index.ts': 'export const processEvent = (e: unknown) => e' } })).status).toBe(200);
    const hash = ((await kvValue(PLUGIN_CONFIGS_BUCKET, key)) as PluginConfigsRecord).configs.find((c) => c.id === config.id)!.plugin.source_hash!;
    expect(hash).toMatch(/^[0-9a-f]{64}$/);
    const code = (await sources.get(hash))!.string();
    expect(code).toContain('exports.processEvent = processEvent');
    expect(createHash('sha256').update(code).digest('hex')).toBe(hash);
    // The request writes the code before the records; the same changes also come through LISTEN,
    // in either order, so workers wait for code a record names (workers/plugins).
    await waitFor('both buckets changed', () => order.includes(`source PUT ${hash}`) && order.some((o) => o.startsWith(`config PUT ${key}`)), 2_000);

    // New code: the new hash in both buckets, the old one gone.
    expect((await f.api('PATCH', path, { key: u.key, body: { 'index.ts': 'export const processEvent = (e: unknown) => null' } })).status).toBe(200);
    const next = ((await kvValue(PLUGIN_CONFIGS_BUCKET, key)) as PluginConfigsRecord).configs[0]!.plugin.source_hash!;
    expect(next).not.toBe(hash);
    expect((await sources.get(next))?.string()).toContain('null');
    await waitFor('old code removed', async () => (await sources.get(hash))?.operation !== 'PUT', 2_000);
    for (const w of watches) w.stop();
  });

  it('kv - changes made outside this server (SQL, another replica) reach both buckets through LISTEN', async () => {
    const exp = await newBatchExport(f, owner);
    const { seen: exportsSeen, stop: stopExports } = await watchBucket(BATCH_EXPORTS_BUCKET);
    await withinASecond(
      exportsSeen,
      () => f.db.query("update batch_exports set name = 'from SQL', last_updated_at = now() where id = $1", [exp.id]),
      (s) => s.key === exp.id && (s.value as BatchExportRecord | undefined)?.name === 'from SQL',
      'SQL rename',
    );
    await withinASecond(exportsSeen, () => f.db.query('update batch_exports set deleted = true where id = $1', [exp.id]), (s) => s.key === exp.id && s.op !== 'PUT', 'SQL delete');
    stopExports();

    const plugin = await newPlugin(f, owner);
    const { seen, stop } = await watchBucket(PLUGIN_CONFIGS_BUCKET);
    const u = await f.newUser('sql@kv.example');
    await withinASecond(
      seen,
      () => f.db.query('insert into plugin_configs (team_id, plugin_id, enabled, "order") values ($1, $2, true, 1)', [u.projectId, plugin.id]),
      (s) => s.key === String(u.projectId) && s.op === 'PUT',
      'SQL insert',
    );
    stop();
  });

  it('kv - deleting a project (or its organization) removes its exports and configs from the buckets', async () => {
    const u = await f.newUser('cascade@kv.example');
    const project = (await f.api('POST', `/api/organizations/${u.organizationId}/projects/`, { key: u.key, body: { name: 'Doomed' } })).body;
    const exp = (await f.api('POST', `/api/organizations/${u.organizationId}/batch_exports/`, {
      key: u.key,
      body: { name: 'x', interval: 'hour', destination: { type: 'NoOp', config: {} }, team_id: project.id },
    })).body;
    const plugin = await newPlugin(f, u);
    await f.api('POST', `/api/projects/${project.id}/plugin_configs/`, { key: u.key, body: { plugin: plugin.id, order: 1, enabled: true } });
    expect(await kvValue(BATCH_EXPORTS_BUCKET, exp.id)).toBeDefined();
    expect(await kvValue(PLUGIN_CONFIGS_BUCKET, String(project.id))).toBeDefined();
    expect((await f.api('DELETE', `/api/projects/${project.id}/`, { key: u.key })).status).toBe(204);
    await waitFor('export gone', async () => (await kvValue(BATCH_EXPORTS_BUCKET, exp.id)) === undefined, 1_000, 10);
    await waitFor('configs gone', async () => (await kvValue(PLUGIN_CONFIGS_BUCKET, String(project.id))) === undefined, 1_000, 10);

    const exp2 = await newBatchExport(f, u);
    await f.api('POST', `/api/projects/${u.projectId}/plugin_configs/`, { key: u.key, body: { plugin: plugin.id, order: 1, enabled: true } });
    expect((await f.api('DELETE', `/api/organizations/${u.organizationId}/`, { key: u.key })).status).toBe(204);
    await waitFor('org exports gone', async () => (await kvValue(BATCH_EXPORTS_BUCKET, exp2.id)) === undefined, 1_000, 10);
    await waitFor('org configs gone', async () => (await kvValue(PLUGIN_CONFIGS_BUCKET, String(u.projectId))) === undefined, 1_000, 10);
  });

  it('kv - at start both buckets are reconciled: stale keys removed, wrong values fixed, missing ones restored', async () => {
    const exp = await newBatchExport(f, owner);
    const plugin = await newPlugin(f, owner);
    await f.api('POST', `/api/projects/${owner.projectId}/plugin_configs/`, { key: owner.key, body: { plugin: plugin.id, order: 1, enabled: true } });
    const exportsKv = await new Kvm(f.nc).open(BATCH_EXPORTS_BUCKET);
    const configsKv = await new Kvm(f.nc).open(PLUGIN_CONFIGS_BUCKET);
    const rightExport = await kvValue(BATCH_EXPORTS_BUCKET, exp.id);
    const rightConfigs = await kvValue(PLUGIN_CONFIGS_BUCKET, String(owner.projectId));
    await exportsKv.put('00000000-0000-0000-0000-00000000dead', '{}');
    await exportsKv.delete(exp.id);
    await configsKv.put('424242', '{}');
    await configsKv.put(String(owner.projectId), '{"wrong":true}');
    const second = await startAdmin(f.config, { logger: createLogger('admin-test', 'silent') });
    try {
      expect(await kvValue(BATCH_EXPORTS_BUCKET, '00000000-0000-0000-0000-00000000dead')).toBeUndefined();
      expect(await kvValue(BATCH_EXPORTS_BUCKET, exp.id)).toEqual(rightExport);
      expect(await kvValue(PLUGIN_CONFIGS_BUCKET, '424242')).toBeUndefined();
      expect(await kvValue(PLUGIN_CONFIGS_BUCKET, String(owner.projectId))).toEqual(rightConfigs);
      const keys: string[] = [];
      for await (const k of await exportsKv.keys()) keys.push(k);
      const { rows } = await f.db.query<{ id: string }>('select id from batch_exports where not deleted');
      expect(keys.sort()).toEqual(rows.map((r) => r.id).sort());
    } finally {
      await second.stop();
    }
  });

  it('kv - at start, code saved before sources were compiled is compiled and reaches spate-plugin-sources', async () => {
    const u = await f.newUser('precompile@kv.example');
    const plugin = await newPlugin(f, u, 'pipeline_transformations');
    const broken = await newPlugin(f, u, 'pipeline_transformations');
    // As an earlier version stored them: files, no compiled code.
    await f.db.query("insert into plugin_source_files (plugin_id, filename, source) values ($1, 'index.ts', 'export const processEvent = (e: object) => e'), ($2, 'index.js', 'return +')", [plugin.id, broken.id]);
    const second = await startAdmin(f.config, { logger: createLogger('admin-test', 'silent') });
    try {
      const { rows } = await f.db.query('select id, source_hash from plugins where id = any($1::int[]) order by id', [[plugin.id, broken.id]]);
      expect(rows[0].source_hash).toMatch(/^[0-9a-f]{64}$/);
      expect(rows[1].source_hash).toBeNull();
      const code = (await (await new Kvm(f.nc).open(PLUGIN_SOURCES_BUCKET)).get(rows[0].source_hash))?.string();
      expect(code).toContain('exports.processEvent = processEvent');
    } finally {
      await second.stop();
    }
  });

  it('kv - a record too large for NATS never keeps other keys stale, and the server still starts', async () => {
    const big = await f.newUser('big@kv.example');
    const plugin = await newPlugin(f, big);
    const configs = `/api/projects/${big.projectId}/plugin_configs/`;
    const blob = 'x'.repeat(900_000);
    // Ten such configs make the project's record larger than the test server's max payload (8 MiB).
    for (let order = 0; order < 10; order++) {
      expect((await f.api('POST', configs, { key: big.key, body: { plugin: plugin.id, order, enabled: true, config: { blob } } })).status).toBe(201);
    }
    const configsKv = await new Kvm(f.nc).open(PLUGIN_CONFIGS_BUCKET);
    const ownerKey = String(owner.projectId);
    const plugin2 = await newPlugin(f, owner);
    await f.api('POST', `/api/projects/${owner.projectId}/plugin_configs/`, { key: owner.key, body: { plugin: plugin2.id, order: 1, enabled: true } });
    const right = await kvValue(PLUGIN_CONFIGS_BUCKET, ownerKey);
    await configsKv.put(ownerKey, '{"stale":true}');
    await configsKv.put('434343', '{}');
    const second = await startAdmin(f.config, { logger: createLogger('admin-test', 'silent') });
    try {
      expect(await kvValue(PLUGIN_CONFIGS_BUCKET, ownerKey)).toEqual(right);
      expect(await kvValue(PLUGIN_CONFIGS_BUCKET, '434343')).toBeUndefined();
      // Its record stays as it was before it became too large.
      expect((await kvValue(PLUGIN_CONFIGS_BUCKET, String(big.projectId)) as PluginConfigsRecord).configs).toHaveLength(9);
    } finally {
      await second.stop();
    }
  });

  it('kv - with NATS down, changes and backfills still answer; buckets and the backfill request catch up when it is back', async () => {
    await using iso = await startAdminFixture();
    const u = await iso.newUser('outage@kv.example');
    const base = `/api/organizations/${u.organizationId}/batch_exports/`;
    const exp = (await iso.api('POST', base, { key: u.key, body: { name: 'x', interval: 'hour', destination: { type: 'NoOp', config: {} } } })).body;
    await iso.nats.kill();
    const started = Date.now();
    expect((await iso.api('POST', `${base}${exp.id}/pause/`, { key: u.key })).status).toBe(200);
    const backfill = await iso.api('POST', `${base}${exp.id}/backfill/`, { key: u.key, body: { start_at: '2024-01-01T00:00:00Z', end_at: '2024-01-01T01:00:00Z' } });
    expect(backfill.status).toBe(200);
    expect(Date.now() - started).toBeLessThan(8_000);
    expect((await iso.db.query('select count(*)::int as n from nats_outbox')).rows[0].n).toBe(1);
    await iso.nats.restart();
    const kv = await new Kvm(iso.nc).open(BATCH_EXPORTS_BUCKET);
    await waitFor('bucket caught up', async () => {
      const e = await kv.get(exp.id);
      return e?.operation === 'PUT' && e.json<BatchExportRecord>().paused;
    }, 20_000, 100);
    await waitFor('outbox published', async () => (await iso.db.query('select count(*)::int as n from nats_outbox')).rows[0].n === 0, 20_000, 100);
    const jsm = await jetstreamManager(iso.nc);
    const info = await jsm.consumers.add('BATCH_EXPORT_BACKFILLS', { ack_policy: AckPolicy.None });
    expect(info.num_pending).toBe(1);
    const msg = await (await jetstream(iso.nc).consumers.get('BATCH_EXPORT_BACKFILLS', info.name)).next({ expires: 2_000 });
    expect(msg?.json()).toMatchObject({ batch_export_id: exp.id, total_runs: 1 });
  }, 90_000);
});

import { AckPolicy, jetstream, jetstreamManager, type JsMsg } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decryptConfigSecrets, isEncryptedSecret, PLUGIN_CONFIGS_BUCKET, secretContext, type PluginConfigsRecord, type PluginJobRequest } from '../lib/index.js';
import { newPlugin } from '../test/admin/endpoints.js';
import { startAdminFixture, type AdminFixture, type TestUser } from '../test/admin/harness.js';
import { testSecretKeyring } from '../test/kit/index.js';
import { paginatedPluginConfigs, pluginConfigSchema } from './pipeline-schemas.js';

let f: AdminFixture;
let owner: TestUser;
let base: string;

beforeAll(async () => {
  f = await startAdminFixture();
  owner = await f.newUser('owner@configs.example');
  base = `/api/projects/${owner.projectId}/plugin_configs/`;
});
afterAll(async () => f?.stop());

const MASK = '**************** POSTHOG SECRET FIELD ****************';
const validation = (detail: string, attr: string | null) => ({ type: 'validation_error', code: 'validation_error', detail, attr });
const notFound = { type: 'invalid_request', code: 'not_found', detail: 'Not found.', attr: null };
const schema = [
  { key: 'url', name: 'URL', type: 'string', required: true },
  { key: 'api_key', name: 'API key', type: 'string', secret: true },
];

async function setup(user: TestUser, body: Record<string, unknown> = {}) {
  const plugin = await newPlugin(f, user, 'pipeline_destinations', { name: 'Webhook', description: 'Sends events', config_schema: schema });
  const res = await f.api('POST', `/api/projects/${user.projectId}/plugin_configs/`, { key: user.key, body: { plugin: plugin.id, order: 1, ...body } });
  expect(res.status, res.text).toBe(201);
  return { plugin, config: res.body };
}

/** Stored values as a worker reads them: secret fields (stored encrypted) decrypted. */
function decrypted(config: Record<string, unknown>, teamId: number): Record<string, unknown> {
  return decryptConfigSecrets(config, testSecretKeyring(), (field) => secretContext('plugin_config', teamId, field));
}

async function kvRecord(projectId: number): Promise<PluginConfigsRecord | undefined> {
  const e = await (await new Kvm(f.nc).open(PLUGIN_CONFIGS_BUCKET)).get(String(projectId));
  return e?.operation === 'PUT' ? e.json<PluginConfigsRecord>() : undefined;
}

describe('plugin configs', () => {
  it('plugin configs - create: defaults, plugin_info, names from the plugin, secrets masked', async () => {
    const { plugin, config } = await setup(owner, { config: { url: 'https://hook.example', api_key: 'sk_live' } });
    const parsed = pluginConfigSchema.parse(config);
    expect(parsed).toMatchObject({
      plugin: plugin.id,
      enabled: false,
      order: 1,
      config: { url: 'https://hook.example', api_key: MASK },
      error: null,
      team_id: owner.projectId,
      delivery_rate_24h: null,
      name: 'Webhook',
      description: 'Sends events',
      deleted: false,
    });
    expect(parsed.plugin_info).toMatchObject({ id: plugin.id, name: 'Webhook' });
    expect(JSON.stringify(config)).not.toContain('sk_live');
    const raw = (await f.db.query('select config from plugin_configs where id = $1', [config.id])).rows[0].config;
    expect(isEncryptedSecret(raw.api_key)).toBe(true);
    expect(JSON.stringify(raw)).not.toContain('sk_live');
    expect(decrypted(raw, owner.projectId)).toEqual({ url: 'https://hook.example', api_key: 'sk_live' });
    const one = await f.api('GET', `${base}${config.id}/`, { key: owner.key });
    expect(one.body).toEqual(config);
    const named = await f.api('POST', base, { key: owner.key, body: { plugin: plugin.id, order: 2, name: 'Own name', description: 'Own text', enabled: true } });
    expect(named.body).toMatchObject({ name: 'Own name', description: 'Own text', enabled: true });
  });

  it('plugin configs - invalid bodies and plugins the organization cannot use', async () => {
    const stranger = await f.newUser('stranger@configs.example');
    const theirs = await newPlugin(f, stranger);
    const globalOne = await newPlugin(f, stranger, 'pipeline_transformations', { is_global: true });
    const mine = await newPlugin(f, owner);
    const cases: Array<[Record<string, unknown>, ReturnType<typeof validation>]> = [
      [{ order: 1 }, validation('This field is required.', 'plugin')],
      [{ plugin: mine.id }, validation('This field is required.', 'order')],
      [{ plugin: mine.id, order: 'first' }, validation('A valid integer is required.', 'order')],
      [{ plugin: mine.id, order: 2 ** 31 }, validation('Ensure this value is less than or equal to 2147483647.', 'order')],
      [{ plugin: mine.id, order: 1, enabled: 'yes' }, validation('Must be a valid boolean.', 'enabled')],
      [{ plugin: mine.id, order: 1, config: 'x' }, validation('Invalid data. Expected a dictionary, but got str.', 'config')],
      [{ plugin: 999_999, order: 1 }, validation('Invalid pk "999999" - object does not exist.', 'plugin')],
      [{ plugin: -1, order: 1 }, validation('Invalid pk "-1" - object does not exist.', 'plugin')],
      [{ plugin: theirs.id, order: 1 }, validation(`Invalid pk "${theirs.id}" - object does not exist.`, 'plugin')],
    ];
    for (const [body, expected] of cases) {
      const res = await f.api('POST', base, { key: owner.key, body });
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body, JSON.stringify(body)).toEqual(expected);
    }
    expect((await f.api('POST', base, { key: owner.key, body: { plugin: globalOne.id, order: 1 } })).status).toBe(201);
    expect((await f.api('POST', `/api/projects/${stranger.projectId}/plugin_configs/`, { key: owner.key, body: { plugin: mine.id, order: 1 } })).body).toEqual(notFound);
  });

  it('plugin configs - PATCH: config replaced, secrets kept when null, masked or left out; deleted disables; plugin cannot change', async () => {
    const { config } = await setup(owner, { enabled: true, config: { url: 'https://a', api_key: 'secret-1' } });
    const path = `${base}${config.id}/`;
    const stored = async () => (await f.db.query('select config, enabled, deleted, plugin_id from plugin_configs where id = $1', [config.id])).rows[0];
    for (const body of [{ url: 'https://b', api_key: null }, { url: 'https://c', api_key: MASK }, { url: 'https://d' }]) {
      const res = await f.api('PATCH', path, { key: owner.key, body: { config: body } });
      expect(res.status).toBe(200);
      expect(res.body.config).toEqual({ url: body.url, api_key: MASK });
      expect(decrypted((await stored()).config, owner.projectId)).toEqual({ url: body.url, api_key: 'secret-1' });
    }
    await f.api('PATCH', path, { key: owner.key, body: { config: { url: 'https://e', api_key: 'secret-2' } } });
    expect(decrypted((await stored()).config, owner.projectId).api_key).toBe('secret-2');
    expect(JSON.stringify((await stored()).config)).not.toContain('secret-2');
    const other = await newPlugin(f, owner);
    const res = await f.api('PATCH', path, { key: owner.key, body: { plugin: other.id, order: 9, name: 'Renamed' } });
    expect(res.body).toMatchObject({ plugin: config.plugin, order: 9, name: 'Renamed' });
    const deleted = await f.api('PATCH', path, { key: owner.key, body: { deleted: true, enabled: true } });
    expect(deleted.body).toMatchObject({ deleted: true, enabled: false });
    expect((await f.api('PATCH', path, { key: owner.key, body: { order: 1.5 } })).body).toEqual(validation('A valid integer is required.', 'order'));

    const activity = (await f.db.query("select activity, detail from activity_log where scope = 'PluginConfig' and item_id = $1 order by created_at", [String(config.id)])).rows;
    expect(activity.map((a) => a.activity)).toEqual(['created', 'config_updated', 'config_updated', 'config_updated', 'config_updated', 'config_updated', 'config_updated', 'disabled']);
    const secretChange = activity[4].detail.changes.find((c: { field: string }) => c.field === 'config.api_key');
    expect(secretChange).toEqual({ field: 'config.api_key', before: '(secret)', after: '(secret)' });
    expect(JSON.stringify(activity)).not.toContain('secret-');
  });

  it('plugin configs - DELETE disables and hides (204); the config can still be read and undeleted', async () => {
    const { config } = await setup(owner, { enabled: true, order: 50 });
    const res = await f.api('DELETE', `${base}${config.id}/`, { key: owner.key });
    expect(res.status).toBe(204);
    expect(res.text).toBe('');
    const list = await f.api('GET', `${base}?limit=1000`, { key: owner.key });
    expect(list.body.results.map((c: { id: number }) => c.id)).not.toContain(config.id);
    expect((await f.api('GET', `${base}${config.id}/`, { key: owner.key })).body).toMatchObject({ deleted: true, enabled: false });
    expect((await f.api('DELETE', `${base}${config.id}/`, { key: owner.key })).status).toBe(204);
    const enableOnly = await f.api('PATCH', `${base}${config.id}/`, { key: owner.key, body: { enabled: true } });
    expect(enableOnly.status).toBe(400);
    expect(enableOnly.body).toMatchObject({ code: 'validation_error', attr: 'enabled' });
    expect((await f.api('GET', `${base}${config.id}/`, { key: owner.key })).body).toMatchObject({ deleted: true, enabled: false });
    const back = await f.api('PATCH', `${base}${config.id}/`, { key: owner.key, body: { deleted: false, enabled: true } });
    expect(back.body).toMatchObject({ deleted: false, enabled: true });
    expect((await f.api('DELETE', `${base}999999/`, { key: owner.key })).body).toEqual(notFound);
  });

  it('plugin configs - the list is ordered by order, then plugin, and shows no plugin_info', async () => {
    const u = await f.newUser('order@configs.example');
    for (const order of [3, 1, 2]) await setup(u, { order });
    const res = await f.api('GET', `/api/projects/${u.projectId}/plugin_configs/`, { key: u.key });
    const page = paginatedPluginConfigs.parse(res.body);
    expect(page.results.map((c) => c.order)).toEqual([1, 2, 3]);
    expect(page.results.every((c) => c.plugin_info === null)).toBe(true);
  });

  it('plugin configs - activity, frontend and migrate answer 200 with an empty body', async () => {
    const { config } = await setup(owner, { enabled: true });
    for (const [method, action] of [['GET', 'activity'], ['GET', 'frontend'], ['POST', 'migrate']] as const) {
      const res = await f.api(method, `${base}${config.id}/${action}/`, { key: owner.key, body: method === 'POST' ? {} : undefined });
      expect(res.status, action).toBe(200);
      expect(res.text).toBe('');
    }
    expect((await f.db.query('select enabled from plugin_configs where id = $1', [config.id])).rows[0].enabled).toBe(true);
  });

  it('plugin configs - job: accepts the config body fields; a job needs a type, is recorded and reaches the workers on PLUGIN_JOBS', async () => {
    const { config, plugin } = await setup(owner);
    const path = `${base}${config.id}/job/`;
    // The spec: 200, empty, accepts the plugin config body fields. Without a job nothing is asked.
    for (const body of [{}, { enabled: true }, { plugin: plugin.id, enabled: false, order: 3, name: 'n', description: 'd', deleted: false }]) {
      const res = await f.api('POST', path, { key: owner.key, body });
      expect([res.status, res.text], JSON.stringify(body)).toEqual([200, '']);
    }
    expect((await f.db.query('select count(*)::int as n from plugin_jobs where plugin_config_id = $1', [config.id])).rows[0].n).toBe(0);
    expect((await f.api('GET', `${base}${config.id}/`, { key: owner.key })).body).toMatchObject({ enabled: config.enabled, order: config.order });
    const wrongType = await f.api('POST', path, { key: owner.key, body: { enabled: 'yes' } });
    expect([wrongType.status, wrongType.body.attr]).toEqual([400, 'enabled']);
    for (const body of [{ job: {} }, { job: 'run' }, { job: null }, { job: { payload: {} } }, { enabled: true, job: {} }]) {
      const res = await f.api('POST', path, { key: owner.key, body });
      expect(res.body, JSON.stringify(body)).toEqual(validation('The job type must be specified!', null));
    }
    expect((await f.api('POST', path, { key: owner.key, body: { job: { type: 5 } } })).body).toEqual(validation('Not a valid string.', 'job__type'));
    expect((await f.api('POST', path, { key: owner.key, body: { job: { type: 'x', operation: 'pause' } } })).body).toEqual(validation('"pause" is not a valid choice.', 'job__operation'));
    const res = await f.api('POST', path, { key: owner.key, body: { job: { type: 'exportHistoricalEvents', payload: { dateFrom: '2024-01-01' } } } });
    expect(res.status).toBe(200);
    expect(res.text).toBe('');
    const jobs = (await f.db.query('select * from plugin_jobs where plugin_config_id = $1', [config.id])).rows;
    expect(jobs).toHaveLength(1);
    expect(jobs[0]).toMatchObject({ type: 'exportHistoricalEvents', operation: 'start', payload: { dateFrom: '2024-01-01' }, created_by_id: owner.id });

    const jsm = await jetstreamManager(f.nc);
    const info = await jsm.consumers.add('PLUGIN_JOBS', { ack_policy: AckPolicy.None, filter_subject: `plugin_jobs.${owner.projectId}.${config.id}` });
    const messages = await (await jetstream(f.nc).consumers.get('PLUGIN_JOBS', info.name)).fetch({ max_messages: 10, expires: 1_000 });
    const seen: Array<{ msgId: string | undefined; request: PluginJobRequest }> = [];
    for await (const m of messages as AsyncIterable<JsMsg>) seen.push({ msgId: m.headers?.get('Nats-Msg-Id'), request: m.json<PluginJobRequest>() });
    expect(seen).toEqual([
      {
        msgId: `job:${jobs[0].id}`,
        request: {
          id: jobs[0].id,
          team_id: owner.projectId,
          plugin_config_id: config.id,
          plugin_id: plugin.id,
          type: 'exportHistoricalEvents',
          payload: { dateFrom: '2024-01-01' },
          operation: 'start',
          created_at: jobs[0].created_at.toISOString(),
        },
      },
    ]);
  });

  it('plugin configs - rearrange sets orders of enabled configs and answers with them in the new order', async () => {
    const u = await f.newUser('rearrange@configs.example');
    const a = (await setup(u, { enabled: true, order: 1 })).config;
    const b = (await setup(u, { enabled: true, order: 2 })).config;
    const c = (await setup(u, { enabled: false, order: 3 })).config;
    const path = `/api/projects/${u.projectId}/plugin_configs/rearrange/`;
    const res = await f.api('PATCH', path, { key: u.key, body: { orders: { [a.id]: 5, [b.id]: 4, [c.id]: 0, 999999: 1 } } });
    expect(res.status).toBe(200);
    expect(res.body.map((x: { id: number; order: number }) => [x.id, x.order])).toEqual([[b.id, 4], [a.id, 5]]);
    expect(res.body.every((x: { plugin_info: unknown }) => x.plugin_info === null)).toBe(true);
    expect((await f.db.query('select "order" from plugin_configs where id = $1', [c.id])).rows[0].order).toBe(3);
    expect((await kvRecord(u.projectId))!.configs.map((x) => [x.id, x.order])).toEqual([[b.id, 4], [a.id, 5]]);
    expect((await f.api('PATCH', path, { key: u.key, body: {} })).body).toHaveLength(2);
    const cases: Array<[unknown, ReturnType<typeof validation>]> = [
      [{ orders: [1] }, validation('Invalid data. Expected a dictionary, but got list.', 'orders')],
      [{ orders: { abc: 1 } }, validation('Not a valid plugin config id.', 'orders__abc')],
      [{ orders: { [a.id]: 'x' } }, validation('A valid integer is required.', `orders__${a.id}`)],
      [{ orders: { [a.id]: 1.5 } }, validation('A valid integer is required.', `orders__${a.id}`)],
    ];
    for (const [body, expected] of cases) expect((await f.api('PATCH', path, { key: u.key, body })).body, JSON.stringify(body)).toEqual(expected);
    const activity = (await f.db.query("select detail from activity_log where activity = 'order_changed' and item_id = $1", [String(a.id)])).rows;
    expect(activity[0].detail.changes).toEqual([{ field: 'order', before: 1, after: 5 }]);
  });

  it('plugin configs - concurrent rearranges apply one after the other, never interleaved', async () => {
    const u = await f.newUser('concurrent@configs.example');
    const ids: number[] = [];
    for (let i = 0; i < 8; i++) ids.push((await setup(u, { enabled: true, order: i })).config.id);
    const path = `/api/projects/${u.projectId}/plugin_configs/rearrange/`;
    // Permutations of the same orders 0..7: a call that skipped a config whose order it saw as
    // already right, while another call moved it, would leave a mix of two permutations.
    let seed = 42;
    const random = () => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31;
    const permutations = Array.from({ length: 24 }, () => {
      const orders = ids.map((_, i) => i);
      for (let i = orders.length - 1; i > 0; i--) {
        const j = Math.floor(random() * (i + 1));
        [orders[i], orders[j]] = [orders[j]!, orders[i]!];
      }
      return Object.fromEntries(ids.map((id, i) => [id, orders[i]!]));
    });
    const answers = await Promise.all(permutations.map((orders) => f.api('PATCH', path, { key: u.key, body: { orders } })));
    for (const res of answers) {
      expect(res.status).toBe(200);
      // Each answer shows one whole permutation: its own (nothing of another call mixed in).
      const shown = Object.fromEntries(res.body.map((c: { id: number; order: number }) => [c.id, c.order]));
      expect(permutations).toContainEqual(shown);
    }
    const { rows } = await f.db.query<{ id: number; order: number }>('select id, "order" from plugin_configs where team_id = $1', [u.projectId]);
    const final = Object.fromEntries(rows.map((r) => [r.id, r.order]));
    expect(permutations).toContainEqual(final);
    const kv = await kvRecord(u.projectId);
    expect(Object.fromEntries(kv!.configs.map((c) => [c.id, c.order]))).toEqual(final);
    expect(kv!.configs.map((c) => c.order)).toEqual([...kv!.configs.map((c) => c.order)].sort((x, y) => x - y));
  });

  it('plugin configs - below plugins_access_level 3 a project has no configs and cannot make any', async () => {
    const u = await f.newUser('level@configs.example');
    const { config } = await setup(u, { enabled: true });
    await f.db.query('update organizations set plugins_access_level = 0 where id = $1', [u.organizationId]);
    const p = `/api/projects/${u.projectId}/plugin_configs/`;
    expect((await f.api('GET', p, { key: u.key })).body).toEqual({ count: 0, next: null, previous: null, results: [] });
    for (const [method, path] of [['GET', `${p}${config.id}/`], ['PATCH', `${p}${config.id}/`], ['DELETE', `${p}${config.id}/`], ['GET', `${p}${config.id}/logs/`], ['GET', `${p}${config.id}/frontend/`]] as const) {
      expect((await f.api(method, path, { key: u.key, body: method === 'PATCH' ? {} : undefined })).body, `${method} ${path}`).toEqual(notFound);
    }
    const unavailable = validation('Plugin configuration is not available for the current organization!', null);
    expect((await f.api('POST', p, { key: u.key, body: { plugin: config.plugin, order: 1 } })).body).toEqual(unavailable);
    expect((await f.api('PATCH', `${p}rearrange/`, { key: u.key, body: {} })).body).toEqual(unavailable);
    expect((await f.api('POST', `${p}${config.id}/job/`, { key: u.key, body: { job: { type: 'x' } } })).body).toEqual(unavailable);
  });

  it('plugin configs - unknown, malformed and other projects’ ids are 404', async () => {
    const stranger = await f.newUser('other@configs.example');
    const theirs = (await setup(stranger)).config;
    for (const id of ['999999', 'abc', '0', String(theirs.id)]) {
      for (const [method, suffix] of [['GET', ''], ['PATCH', ''], ['DELETE', ''], ['GET', 'activity/'], ['GET', 'frontend/'], ['POST', 'job/'], ['POST', 'migrate/'], ['GET', 'logs/']] as const) {
        const res = await f.api(method, `${base}${id}/${suffix}`, { key: owner.key, body: method === 'GET' || method === 'DELETE' ? undefined : { job: { type: 'x' } } });
        expect(res.status, `${method} ${id} ${suffix}`).toBe(404);
      }
    }
    for (const project of ['999999', 'x', String(stranger.projectId)]) {
      expect((await f.api('GET', `/api/projects/${project}/plugin_configs/`, { key: owner.key })).body).toEqual(notFound);
    }
    expect((await f.api('GET', `${base}rearrange/`, { key: owner.key })).status).toBe(405);
    expect((await f.api('PUT', `${base}`, { key: owner.key })).status).toBe(405);
  });
});

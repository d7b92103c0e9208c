import { Kvm } from '@nats-io/kv';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PLUGIN_CONFIGS_BUCKET } from '../lib/index.js';
import { newPlugin } from '../test/admin/endpoints.js';
import { startAdminFixture, type AdminFixture, type TestUser } from '../test/admin/harness.js';
import { paginatedPlugins, pluginSchema } from './pipeline-schemas.js';

let f: AdminFixture;
let owner: TestUser;
let org: string;

beforeAll(async () => {
  f = await startAdminFixture();
  owner = await f.newUser('owner@plugins.example', { organizationName: 'Plugin Org' });
  org = `/api/organizations/${owner.organizationId}`;
});
afterAll(async () => f?.stop());

const COLLECTIONS = ['pipeline_destinations', 'pipeline_frontend_apps', 'pipeline_import_apps', 'pipeline_transformations'] as const;
const validation = (detail: string, attr: string | null) => ({ type: 'validation_error', code: 'validation_error', detail, attr });
const denied = (detail: string) => ({ type: 'authentication_error', code: 'permission_denied', detail, attr: null });
const notFound = { type: 'invalid_request', code: 'not_found', detail: 'Not found.', attr: null };

async function setAccessLevel(organizationId: string, level: number): Promise<void> {
  await f.db.query('update organizations set plugins_access_level = $1 where id = $2', [level, organizationId]);
}

describe('pipeline plugins', () => {
  it('plugins - create in each collection with its default capabilities; retrieve and list', async () => {
    const expected = {
      pipeline_destinations: { methods: ['onEvent'] },
      pipeline_frontend_apps: {},
      pipeline_import_apps: { scheduled_tasks: ['runEveryMinute'] },
      pipeline_transformations: { methods: ['processEvent'] },
    };
    for (const collection of COLLECTIONS) {
      const res = await f.api('POST', `${org}/${collection}/`, { key: owner.key, body: { plugin_type: 'source' } });
      expect(res.status, res.text).toBe(201);
      const plugin = pluginSchema.parse(res.body);
      expect(plugin).toMatchObject({
        plugin_type: 'source',
        name: 'Untitled plugin',
        description: '',
        url: null,
        icon: null,
        config_schema: [],
        tag: null,
        latest_tag: null,
        is_global: false,
        organization_id: owner.organizationId,
        organization_name: 'Plugin Org',
        capabilities: expected[collection],
        metrics: {},
        public_jobs: {},
        hog_function_migration_available: false,
      });
      expect((await f.api('GET', `${org}/${collection}/${plugin.id}/`, { key: owner.key })).body).toEqual(plugin);
      const list = paginatedPlugins.parse((await f.api('GET', `${org}/${collection}/`, { key: owner.key })).body);
      expect(list.results.map((p) => p.id)).toContain(plugin.id);
      // A plugin belongs to its collection only.
      for (const other of COLLECTIONS.filter((c) => c !== collection)) {
        expect((await f.api('GET', `${org}/${other}/${plugin.id}/`, { key: owner.key })).status, `${other} ${collection}`).toBe(404);
        const theirs = (await f.api('GET', `${org}/${other}/?limit=1000`, { key: owner.key })).body.results.map((p: { id: number }) => p.id);
        expect(theirs).not.toContain(plugin.id);
      }
    }
  });

  it('plugins - every field round-trips; every plugin_type is accepted, others refused', async () => {
    const body = {
      plugin_type: 'inline',
      name: 'GeoIP ✓',
      description: 'Adds location',
      icon: 'https://example.com/icon.png',
      config_schema: [{ key: 'api_key', name: 'API key', type: 'string', secret: true, required: true }],
      tag: 'v1.2.3',
      capabilities: { methods: ['processEvent', 'setupPlugin'], jobs: [], extra: true },
      metrics: { events_processed: 'sum' },
      public_jobs: { reimport: { type: 'object' } },
    };
    const res = await f.api('POST', `${org}/pipeline_transformations/`, { key: owner.key, body });
    expect(res.status, res.text).toBe(201);
    expect(res.body).toMatchObject(body);
    for (const type of ['local', 'custom', 'repository', 'source', 'inline']) {
      expect((await f.api('POST', `${org}/pipeline_destinations/`, { key: owner.key, body: { plugin_type: type } })).status).toBe(201);
    }
    const bad = await f.api('POST', `${org}/pipeline_destinations/`, { key: owner.key, body: { plugin_type: 'github' } });
    expect(bad.body).toEqual(validation('"github" is not a valid choice.', 'plugin_type'));
    const cases: Array<[Record<string, unknown>, ReturnType<typeof validation>]> = [
      [{ name: '' }, validation('This field may not be blank.', 'name')],
      [{ name: 'x'.repeat(201) }, validation('Ensure this field has no more than 200 characters.', 'name')],
      [{ is_global: 'no' }, validation('Must be a valid boolean.', 'is_global')],
      [{ capabilities: { methods: 'onEvent' } }, validation('Expected a list of items but got type "str".', 'capabilities__methods')],
      [{ config_schema: 'x' }, validation('Expected a list of fields or a dictionary.', 'config_schema')],
      [{ metrics: [] }, validation('Invalid data. Expected a dictionary, but got list.', 'metrics')],
    ];
    for (const [input, expected] of cases) {
      const r = await f.api('POST', `${org}/pipeline_destinations/`, { key: owner.key, body: input });
      expect(r.status, JSON.stringify(input)).toBe(400);
      expect(r.body, JSON.stringify(input)).toEqual(expected);
    }
  });

  it('plugins - capabilities must agree with the collection, on create and on update', async () => {
    const wrong = await f.api('POST', `${org}/pipeline_transformations/`, { key: owner.key, body: { capabilities: { methods: ['onEvent'] } } });
    expect(wrong.status).toBe(400);
    expect(wrong.body).toEqual(
      validation('These capabilities make the plugin a destination, not a transformation (pipeline_transformations).', 'capabilities'),
    );
    const none = await f.api('POST', `${org}/pipeline_import_apps/`, { key: owner.key, body: { capabilities: { scheduled_tasks: [] } } });
    expect(none.body.detail).toBe('These capabilities make the plugin no pipeline collection, not an import app (pipeline_import_apps).');
    const dest = await newPlugin(f, owner);
    const patched = await f.api('PATCH', `${org}/pipeline_destinations/${dest.id}/`, { key: owner.key, body: { capabilities: { methods: ['composeWebhook'] } } });
    expect(patched.status).toBe(200);
    const moved = await f.api('PATCH', `${org}/pipeline_destinations/${dest.id}/`, { key: owner.key, body: { capabilities: {} } });
    expect(moved.body).toEqual(validation('These capabilities make the plugin a frontend app, not a destination (pipeline_destinations).', 'capabilities'));
  });

  it('plugins - PATCH updates and records who changed what', async () => {
    const plugin = await newPlugin(f, owner);
    const res = await f.api('PATCH', `${org}/pipeline_destinations/${plugin.id}/`, { key: owner.key, body: { name: 'Renamed', tag: 'v2' } });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ name: 'Renamed', tag: 'v2' });
    const activity = (await f.db.query("select user_id, activity, detail from activity_log where scope = 'Plugin' and item_id = $1 order by created_at", [String(plugin.id)])).rows;
    expect(activity.map((a) => a.activity)).toEqual(['installed', 'updated']);
    expect(activity[1].user_id).toBe(owner.id);
    expect(activity[1].detail.changes).toEqual([
      { field: 'name', before: plugin.name, after: 'Renamed' },
      { field: 'tag', before: null, after: 'v2' },
    ]);
  });

  it('plugins - plugins_access_level gates reads (3), writes (6) and global plugins (9)', async () => {
    const u = await f.newUser('levels@plugins.example');
    const base = `/api/organizations/${u.organizationId}/pipeline_destinations/`;
    const plugin = await newPlugin(f, u);
    const insufficient = denied("Your organization's plugin access level is insufficient.");
    await setAccessLevel(u.organizationId, 0);
    for (const [method, path] of [['GET', base], ['GET', `${base}${plugin.id}/`], ['GET', `${base}activity/`], ['GET', `${base}unused/`], ['GET', `${base}${plugin.id}/source/`]] as const) {
      const res = await f.api(method, path, { key: u.key });
      expect(res.status, path).toBe(403);
      expect(res.body).toEqual(insufficient);
    }
    await setAccessLevel(u.organizationId, 3);
    expect((await f.api('GET', base, { key: u.key })).status).toBe(200);
    expect((await f.api('GET', `${base}${plugin.id}/`, { key: u.key })).status).toBe(200);
    for (const [method, path, body] of [
      ['POST', base, {}],
      ['PATCH', `${base}${plugin.id}/`, { name: 'x' }],
      ['DELETE', `${base}${plugin.id}/`, undefined],
      ['PATCH', `${base}${plugin.id}/update_source/`, { 'index.ts': '' }],
      ['POST', `${base}${plugin.id}/upgrade/`, {}],
    ] as const) {
      const res = await f.api(method, path, { key: u.key, body });
      expect(res.status, `${method} ${path}`).toBe(403);
      expect(res.body).toEqual(insufficient);
    }
    expect((await f.api('GET', `${base}${plugin.id}/check_for_updates/`, { key: u.key })).body).toEqual(
      denied('Plugin installation is not available for the current organization!'),
    );
    expect((await f.api('GET', `${base}${plugin.id}/source/`, { key: u.key })).body).toEqual(
      denied('Plugin source editing is not available for the current organization!'),
    );
    await setAccessLevel(u.organizationId, 6);
    expect((await f.api('POST', base, { key: u.key, body: {} })).status).toBe(201);
    const global = await f.api('POST', base, { key: u.key, body: { is_global: true } });
    expect(global.body).toEqual(denied("This organization can't manage global plugins!"));
    // Even naming is_global: false needs level 9 on an update, as PostHog does.
    const unset = await f.api('PATCH', `${base}${plugin.id}/`, { key: u.key, body: { is_global: false } });
    expect(unset.body).toEqual(denied("This organization can't manage global plugins!"));
    await setAccessLevel(u.organizationId, 9);
    expect((await f.api('POST', base, { key: u.key, body: { is_global: true } })).body.is_global).toBe(true);
  });

  it('plugins - global plugins are visible to every organization but changed only by their own', async () => {
    const maker = await f.newUser('maker@plugins.example', { organizationName: 'Maker' });
    const user = await f.newUser('user@plugins.example');
    const global = await newPlugin(f, maker, 'pipeline_destinations', { is_global: true });
    const local = await newPlugin(f, maker);
    const base = `/api/organizations/${user.organizationId}/pipeline_destinations/`;
    const seen = (await f.api('GET', `${base}?limit=1000`, { key: user.key })).body.results.map((p: { id: number }) => p.id);
    expect(seen).toContain(global.id);
    expect(seen).not.toContain(local.id);
    expect((await f.api('GET', `${base}${global.id}/`, { key: user.key })).body).toMatchObject({ organization_name: 'Maker', is_global: true });
    expect((await f.api('GET', `${base}${local.id}/`, { key: user.key })).body).toEqual(notFound);
    const foreign = denied('This plugin installation is managed by another organization');
    expect((await f.api('PATCH', `${base}${global.id}/`, { key: user.key, body: { name: 'mine' } })).body).toEqual(foreign);
    expect((await f.api('DELETE', `${base}${global.id}/`, { key: user.key })).body).toEqual(foreign);
    for (const [method, action] of [['GET', 'check_for_updates'], ['GET', 'source'], ['PATCH', 'update_source'], ['POST', 'upgrade']] as const) {
      const res = await f.api(method, `${base}${global.id}/${action}/`, { key: user.key, body: method === 'GET' ? undefined : {} });
      expect(res.body, action).toEqual(notFound);
    }
    // The maker must make it local before uninstalling it.
    const makerBase = `/api/organizations/${maker.organizationId}/pipeline_destinations/`;
    const refused = await f.api('DELETE', `${makerBase}${global.id}/`, { key: maker.key });
    expect(refused.body).toEqual(validation('This plugin is marked as global! Make it local before uninstallation', null));
    // A project that configured it keeps seeing it after it is made local.
    const config = await f.api('POST', `/api/projects/${user.projectId}/plugin_configs/`, { key: user.key, body: { plugin: global.id, order: 1 } });
    expect(config.status).toBe(201);
    expect((await f.api('PATCH', `${makerBase}${global.id}/`, { key: maker.key, body: { is_global: false } })).status).toBe(200);
    expect((await f.api('GET', `${base}${global.id}/`, { key: user.key })).status).toBe(200);
    // Deleting the maker's organization would take the other project's config with its plugin: refused until it is gone.
    const orgDelete = await f.api('DELETE', `/api/organizations/${maker.organizationId}/`, { key: maker.key });
    expect(orgDelete.status).toBe(400);
    expect(orgDelete.body.detail).toMatch(/^1 plugin config\(s\) in other organizations' projects/);
    expect((await f.api('GET', `/api/projects/${user.projectId}/plugin_configs/${config.body.id}/`, { key: user.key })).status).toBe(200);
    // So is uninstalling the plugin itself.
    const pluginDelete = await f.api('DELETE', `${makerBase}${global.id}/`, { key: maker.key });
    expect(pluginDelete.status).toBe(400);
    expect(pluginDelete.body).toEqual(validation("1 plugin config(s) in other organizations' projects use this plugin; they must be removed there first.", null));
    expect((await f.api('GET', `/api/projects/${user.projectId}/plugin_configs/${config.body.id}/`, { key: user.key })).status).toBe(200);
    expect((await f.api('GET', `${makerBase}${global.id}/`, { key: maker.key })).status).toBe(200);
    expect((await f.api('DELETE', `/api/projects/${user.projectId}/plugin_configs/${config.body.id}/`, { key: user.key })).status).toBe(204);
    expect((await f.api('DELETE', `${makerBase}${global.id}/`, { key: maker.key })).status).toBe(204);
    expect((await f.api('DELETE', `/api/organizations/${maker.organizationId}/`, { key: maker.key })).status).toBe(204);
  });

  it('plugins - DELETE uninstalls the plugin and its configs (they leave the workers’ bucket); transformations have no DELETE', async () => {
    const plugin = await newPlugin(f, owner);
    const config = (await f.api('POST', `/api/projects/${owner.projectId}/plugin_configs/`, { key: owner.key, body: { plugin: plugin.id, order: 1, enabled: true } })).body;
    const kv = await new Kvm(f.nc).open(PLUGIN_CONFIGS_BUCKET);
    const ids = async () => {
      const e = await kv.get(String(owner.projectId));
      return e?.operation === 'PUT' ? e.json<{ configs: Array<{ id: number }> }>().configs.map((c) => c.id) : [];
    };
    expect(await ids()).toContain(config.id);
    const res = await f.api('DELETE', `${org}/pipeline_destinations/${plugin.id}/`, { key: owner.key });
    expect(res.status).toBe(204);
    expect(res.text).toBe('');
    expect(await ids()).not.toContain(config.id);
    expect((await f.api('GET', `/api/projects/${owner.projectId}/plugin_configs/${config.id}/`, { key: owner.key })).status).toBe(404);
    expect((await f.api('DELETE', `${org}/pipeline_destinations/${plugin.id}/`, { key: owner.key })).status).toBe(404);

    const transformation = await newPlugin(f, owner, 'pipeline_transformations');
    const del = await f.api('DELETE', `${org}/pipeline_transformations/${transformation.id}/`, { key: owner.key });
    expect(del.status).toBe(405);
    expect(del.body.code).toBe('method_not_allowed');
    for (const [method, suffix] of [['GET', 'source/'], ['GET', 'check_for_updates/'], ['POST', 'upgrade/']] as const) {
      const r = await f.api(method, `${org}/pipeline_transformations/${transformation.id}/${suffix}`, { key: owner.key, body: method === 'GET' ? undefined : {} });
      expect(r.status, suffix).toBe(404);
    }
    for (const action of ['activity', 'unused', 'repository', 'exports_unsubscribe_configs']) {
      expect((await f.api('GET', `${org}/pipeline_transformations/${action}/`, { key: owner.key })).status, action).toBe(404);
    }
  });

  it('plugins - update_source stores files; plugin.json name and config are copied onto the plugin', async () => {
    const plugin = await newPlugin(f, owner, 'pipeline_destinations', { name: 'Before' });
    const path = `${org}/pipeline_destinations/${plugin.id}/update_source/`;
    const manifest = { name: 'From manifest', config: [{ key: 'url', type: 'string', required: true }] };
    const res = await f.api('PATCH', path, {
      key: owner.key,
      body: { 'plugin.json': JSON.stringify(manifest), 'index.ts': 'export function onEvent(e) { return e }', 'README.md': '# hi' },
    });
    expect(res.status, res.text).toBe(200);
    expect(res.text).toBe('');
    const after = (await f.api('GET', `${org}/pipeline_destinations/${plugin.id}/`, { key: owner.key })).body;
    expect(after).toMatchObject({ name: 'From manifest', config_schema: manifest.config });
    const files = async () => (await f.db.query('select filename, source from plugin_source_files where plugin_id = $1 order by filename', [plugin.id])).rows;
    expect((await files()).map((r) => r.filename)).toEqual(['README.md', 'index.ts', 'plugin.json']);
    expect((await f.api('PATCH', path, { key: owner.key, body: { 'README.md': null, 'index.ts': 'v2' } })).status).toBe(200);
    expect(await files()).toEqual([
      { filename: 'index.ts', source: 'v2' },
      { filename: 'plugin.json', source: JSON.stringify(manifest) },
    ]);
    const badJson = await f.api('PATCH', path, { key: owner.key, body: { 'plugin.json': '{nope' } });
    expect(badJson.status).toBe(400);
    expect(badJson.body).toMatchObject({ code: 'validation_error', attr: 'plugin.json' });
    expect(badJson.body.detail).toMatch(/^plugin\.json is not valid JSON: /);
    expect((await f.api('PATCH', path, { key: owner.key, body: { 'plugin.json': '[1]' } })).body).toEqual(validation('plugin.json must be a JSON object.', 'plugin.json'));
    expect((await f.api('PATCH', path, { key: owner.key, body: { 'index.ts': 5 } })).body).toEqual(validation('Not a valid string.', 'index.ts'));
    expect((await f.api('PATCH', path, { key: owner.key, body: ['x'] })).status).toBe(400);
    // A refused update changed nothing.
    expect((await files()).find((r) => r.filename === 'plugin.json')!.source).toBe(JSON.stringify(manifest));
    const activity = (await f.db.query("select detail from activity_log where scope = 'Plugin' and item_id = $1 and activity = 'source_updated' order by created_at", [String(plugin.id)])).rows;
    expect(activity.map((a) => a.detail.files)).toEqual([['plugin.json', 'index.ts', 'README.md'], ['README.md', 'index.ts']]);
    // A key sent in the body authenticates and is never stored as a file.
    const bodyKey = await f.api('PATCH', path, { body: { personal_api_key: owner.key, 'extra.ts': 'x' } });
    expect(bodyKey.status).toBe(200);
    expect((await files()).map((r) => r.filename)).toEqual(['extra.ts', 'index.ts', 'plugin.json']);
    expect(JSON.stringify((await f.db.query('select detail from activity_log where item_id = $1', [String(plugin.id)])).rows)).not.toContain(owner.key);
  });

  it('plugins - update_source compiles index.ts when saved, in every collection: an error is answered 400 with its line and stores nothing', async () => {
    for (const collection of COLLECTIONS) {
      const plugin = await newPlugin(f, owner, collection);
      const path = `${org}/${collection}/${plugin.id}/update_source/`;
      const stored = async () => (await f.db.query('select source_hash, compiled_source from plugins where id = $1', [plugin.id])).rows[0];
      const good = "import type { PluginEvent } from '@posthog/plugin-scaffold'\nexport function processEvent(event: PluginEvent): PluginEvent {\n  return event\n}\n";
      const ok = await f.api('PATCH', path, { key: owner.key, body: { 'index.ts': good } });
      expect([ok.status, ok.text], collection).toEqual([200, '']);
      const first = await stored();
      expect(first.source_hash).toMatch(/^[0-9a-f]{64}$/);
      expect(first.compiled_source).toContain('exports.processEvent = processEvent');
      expect(first.compiled_source).not.toContain('PluginEvent');

      const syntax = await f.api('PATCH', path, { key: owner.key, body: { 'index.ts': 'export function processEvent(event) {\n  return event +\n}\n' } });
      expect(syntax.body, collection).toEqual(validation('index.ts line 3: Unexpected token', 'index.ts'));
      const types = await f.api('PATCH', path, { key: owner.key, body: { 'index.ts': 'export function f(a: number,, b) {}' } });
      expect(types.body).toEqual(validation('index.ts line 1: Unexpected token', 'index.ts'));
      const js = await f.api('PATCH', path, { key: owner.key, body: { 'index.ts': null, 'index.js': 'const a = 1\nconst a = 2\n' } });
      expect(js.body).toEqual(validation('index.js line 2: SyntaxError: invalid redefinition of lexical identifier', 'index.js'));
      const imports = await f.api('PATCH', path, { key: owner.key, body: { 'index.ts': "import { S3 } from 'aws-sdk'\nexport const setupPlugin = () => new S3()" } });
      expect(imports.body.detail).toBe("index.ts line 1: import 'aws-sdk' is not available in Spate (available: node-fetch, cross-fetch, @posthog/plugin-scaffold)");
      // Refused saves changed nothing: the source and its code are the good ones.
      expect(await stored()).toEqual(first);
      const files = (await f.db.query('select filename, source from plugin_source_files where plugin_id = $1', [plugin.id])).rows;
      expect(files).toEqual([{ filename: 'index.ts', source: good }]);
    }
  });

  it('plugins - update_source takes only safe relative file names', async () => {
    const plugin = await newPlugin(f, owner, 'pipeline_destinations');
    const path = `${org}/pipeline_destinations/${plugin.id}/update_source/`;
    for (const name of ['../index.ts', '/etc/passwd', 'a/../../b', 'sp ace.ts', 'x\\y.ts']) {
      const res = await f.api('PATCH', path, { key: owner.key, body: { [name]: 'export {}' } });
      expect([res.status, res.body.attr], name).toEqual([400, name]);
      expect(res.body.detail).toMatch(/ is not a safe file name: /);
    }
    expect((await f.db.query('select count(*)::int as n from plugin_source_files where plugin_id = $1', [plugin.id])).rows[0].n).toBe(0);
    expect((await f.api('PATCH', path, { key: owner.key, body: { 'src/helpers.ts': 'export {}', 'README.md': '#' } })).status).toBe(200);
  });

  it('plugins - check_for_updates, source and upgrade answer 200 with an empty body', async () => {
    const plugin = await newPlugin(f, owner, 'pipeline_import_apps', { tag: 'v1' });
    const base = `${org}/pipeline_import_apps/${plugin.id}/`;
    const before = (await f.db.query('select updated_at from plugins where id = $1', [plugin.id])).rows[0].updated_at;
    const check = await f.api('GET', `${base}check_for_updates/`, { key: owner.key });
    expect(check.status).toBe(200);
    expect(check.text).toBe('');
    const row = (await f.db.query('select latest_tag, latest_tag_checked_at, updated_at from plugins where id = $1', [plugin.id])).rows[0];
    expect(row.latest_tag).toBe('v1');
    expect(row.latest_tag_checked_at).not.toBeNull();
    expect(row.updated_at).toEqual(before);
    const source = await f.api('GET', `${base}source/`, { key: owner.key });
    expect(source.status).toBe(200);
    expect(source.text).toBe('');
    const upgrade = await f.api('POST', `${base}upgrade/`, { key: owner.key, body: { tag: 'v2' } });
    expect(upgrade.status).toBe(200);
    expect(upgrade.text).toBe('');
    expect((await f.api('GET', base, { key: owner.key })).body).toMatchObject({ tag: 'v2', latest_tag: 'v2' });
    const badUpgrade = await f.api('POST', `${base}upgrade/`, { key: owner.key, body: { tag: 7 } });
    expect(badUpgrade.body).toEqual(validation('Not a valid string.', 'tag'));
  });

  it('plugins - activity, exports_unsubscribe_configs, repository and unused answer 200 with an empty body', async () => {
    for (const collection of COLLECTIONS.filter((c) => c !== 'pipeline_transformations')) {
      for (const action of ['activity', 'exports_unsubscribe_configs', 'repository', 'unused']) {
        const res = await f.api('GET', `${org}/${collection}/${action}/`, { key: owner.key });
        expect(res.status, `${collection} ${action}`).toBe(200);
        expect(res.text).toBe('');
      }
    }
  });

  it('plugins - unknown, malformed and other organizations’ ids are 404; wrong methods 405', async () => {
    const stranger = await f.newUser('stranger@plugins.example');
    const theirs = await newPlugin(f, stranger);
    for (const id of ['999999', 'abc', '0', '99999999999', String(theirs.id)]) {
      const res = await f.api('GET', `${org}/pipeline_destinations/${id}/`, { key: owner.key });
      expect(res.status, id).toBe(404);
      expect(res.body).toEqual(notFound);
    }
    expect((await f.api('GET', `/api/organizations/${stranger.organizationId}/pipeline_destinations/`, { key: owner.key })).body).toEqual(notFound);
    expect((await f.api('PUT', `${org}/pipeline_destinations/`, { key: owner.key })).status).toBe(405);
    expect((await f.api('POST', `${org}/pipeline_destinations/unused/`, { key: owner.key })).status).toBe(405);
    expect((await f.api('GET', `${org}/pipeline_destinations/${theirs.id}/update_source/`, { key: owner.key })).status).toBe(405);
  });
});

// Every endpoint of the admin API with a way to make a fresh, valid request to it for a given
// owner: the scope matrix and the isolation tests run over this list, and a test checks that
// it covers every route the server has.
import { randomBytes } from 'node:crypto';
import type { AdminFixture, TestUser } from './harness.js';

export interface PreparedRequest {
  path: string;
  body?: unknown;
}

export interface EndpointCase {
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE';
  /** The route pattern as the server declares it. */
  route: string;
  scope: string;
  success: number;
  /** True for lists that span organizations (they filter instead of answering 404). */
  global?: boolean;
  /** Creates what the request needs in `owner`'s organization, using the owner's `*` key. */
  prepare(f: AdminFixture, owner: TestUser): PreparedRequest | Promise<PreparedRequest>;
}

const unique = () => randomBytes(5).toString('hex');

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- setup bodies are read by the cases that made them
async function post(f: AdminFixture, owner: TestUser, path: string, body: unknown): Promise<any> {
  const res = await f.api('POST', path, { key: owner.key, body });
  if (res.status !== 201) throw new Error(`setup POST ${path} answered ${res.status}: ${res.text}`);
  return res.body;
}

const org = (o: TestUser) => `/api/organizations/${o.organizationId}`;
const newDomain = (f: AdminFixture, o: TestUser) => post(f, o, `${org(o)}/domains/`, { domain: `d${unique()}.example.com` });
const newInvite = (f: AdminFixture, o: TestUser) => post(f, o, `${org(o)}/invites/`, { target_email: `i${unique()}@example.com` });
const newProject = (f: AdminFixture, o: TestUser) => post(f, o, `${org(o)}/projects/`, { name: `p${unique()}` });
const newMember = (f: AdminFixture, o: TestUser) => f.addMember(o.organizationId, `m${unique()}@example.com`, 1);
export const newBatchExport = (f: AdminFixture, o: TestUser, body: Record<string, unknown> = {}) =>
  post(f, o, `${org(o)}/batch_exports/`, { name: `e${unique()}`, destination: { type: 'NoOp', config: {} }, interval: 'hour', ...body });
export const newPlugin = (f: AdminFixture, o: TestUser, collection: string = 'pipeline_destinations', body: Record<string, unknown> = {}) =>
  post(f, o, `${org(o)}/${collection}/`, { name: `plugin ${unique()}`, plugin_type: 'source', ...body });
export async function newPluginConfig(f: AdminFixture, o: TestUser, body: Record<string, unknown> = {}) {
  const plugin = await newPlugin(f, o);
  return post(f, o, `/api/projects/${o.projectId}/plugin_configs/`, { plugin: plugin.id, order: 1, enabled: true, ...body });
}

const COLLECTIONS = ['pipeline_destinations', 'pipeline_frontend_apps', 'pipeline_import_apps', 'pipeline_transformations'];

function pluginCases(collection: string): EndpointCase[] {
  const base = `/api/organizations/:organization_id/${collection}/`;
  const list = (o: TestUser) => `${org(o)}/${collection}/`;
  const item = async (f: AdminFixture, o: TestUser) => `${list(o)}${(await newPlugin(f, o, collection)).id}/`;
  const cases: EndpointCase[] = [
    { method: 'GET', route: base, scope: 'plugin:read', success: 200, prepare: (_f, o) => ({ path: list(o) }) },
    { method: 'POST', route: base, scope: 'plugin:write', success: 201, prepare: (_f, o) => ({ path: list(o), body: { name: `new ${unique()}` } }) },
    { method: 'GET', route: `${base}:id/`, scope: 'plugin:read', success: 200, prepare: async (f, o) => ({ path: await item(f, o) }) },
    { method: 'PATCH', route: `${base}:id/`, scope: 'plugin:write', success: 200, prepare: async (f, o) => ({ path: await item(f, o), body: { description: 'changed' } }) },
  ];
  const updateSource = (source: string): EndpointCase => ({
    method: 'PATCH',
    route: `${base}:id/update_source/`,
    scope: 'plugin:write',
    success: 200,
    prepare: async (f, o) => ({ path: `${await item(f, o)}update_source/`, body: { 'index.ts': source } }),
  });
  // Transformations have no delete and no sub-endpoints but update_source (admin/routes/plugins.ts).
  if (collection === 'pipeline_transformations') return [...cases, updateSource('export function processEvent(event) { return event }')];
  cases.push(
    { method: 'DELETE', route: `${base}:id/`, scope: 'plugin:write', success: 204, prepare: async (f, o) => ({ path: await item(f, o) }) },
    { method: 'GET', route: `${base}:id/check_for_updates/`, scope: 'plugin:read', success: 200, prepare: async (f, o) => ({ path: `${await item(f, o)}check_for_updates/` }) },
    { method: 'GET', route: `${base}:id/source/`, scope: 'plugin:read', success: 200, prepare: async (f, o) => ({ path: `${await item(f, o)}source/` }) },
    updateSource('export function onEvent() {}'),
    { method: 'POST', route: `${base}:id/upgrade/`, scope: 'plugin:write', success: 200, prepare: async (f, o) => ({ path: `${await item(f, o)}upgrade/`, body: { tag: 'v2' } }) },
  );
  for (const action of ['activity', 'exports_unsubscribe_configs', 'repository', 'unused']) {
    cases.push({ method: 'GET', route: `${base}${action}/`, scope: 'plugin:read', success: 200, prepare: (_f, o) => ({ path: `${list(o)}${action}/` }) });
  }
  return cases;
}

const exportsBase = '/api/organizations/:organization_id/batch_exports/';
const exportItem = async (f: AdminFixture, o: TestUser) => `${org(o)}/batch_exports/${(await newBatchExport(f, o)).id}/`;
const configsBase = '/api/projects/:project_id/plugin_configs/';
const configItem = async (f: AdminFixture, o: TestUser) => `/api/projects/${o.projectId}/plugin_configs/${(await newPluginConfig(f, o)).id}/`;

export const endpointCases: EndpointCase[] = [
  // organizations
  { method: 'GET', route: '/api/organizations/', scope: 'organization:read', success: 200, global: true, prepare: () => ({ path: '/api/organizations/' }) },
  { method: 'POST', route: '/api/organizations/', scope: 'organization:write', success: 201, global: true, prepare: () => ({ path: '/api/organizations/', body: { name: `o${unique()}` } }) },
  { method: 'GET', route: '/api/organizations/:id/', scope: 'organization:read', success: 200, prepare: (_f, o) => ({ path: `${org(o)}/` }) },
  { method: 'PATCH', route: '/api/organizations/:id/', scope: 'organization:write', success: 200, prepare: (_f, o) => ({ path: `${org(o)}/`, body: { name: `renamed ${unique()}` } }) },
  {
    method: 'DELETE',
    route: '/api/organizations/:id/',
    scope: 'organization:write',
    success: 204,
    prepare: async (f, o) => ({ path: `/api/organizations/${(await post(f, o, '/api/organizations/', { name: `doomed ${unique()}` })).id}/` }),
  },
  // domains
  { method: 'GET', route: '/api/organizations/:organization_id/domains/', scope: 'organization:read', success: 200, prepare: (_f, o) => ({ path: `${org(o)}/domains/` }) },
  {
    method: 'POST',
    route: '/api/organizations/:organization_id/domains/',
    scope: 'organization:write',
    success: 201,
    prepare: (_f, o) => ({ path: `${org(o)}/domains/`, body: { domain: `new${unique()}.example.org` } }),
  },
  {
    method: 'GET',
    route: '/api/organizations/:organization_id/domains/:id/',
    scope: 'organization:read',
    success: 200,
    prepare: async (f, o) => ({ path: `${org(o)}/domains/${(await newDomain(f, o)).id}/` }),
  },
  {
    method: 'PATCH',
    route: '/api/organizations/:organization_id/domains/:id/',
    scope: 'organization:write',
    success: 200,
    prepare: async (f, o) => ({ path: `${org(o)}/domains/${(await newDomain(f, o)).id}/`, body: { saml_entity_id: 'changed' } }),
  },
  {
    method: 'DELETE',
    route: '/api/organizations/:organization_id/domains/:id/',
    scope: 'organization:write',
    success: 204,
    prepare: async (f, o) => ({ path: `${org(o)}/domains/${(await newDomain(f, o)).id}/` }),
  },
  {
    method: 'POST',
    route: '/api/organizations/:organization_id/domains/:id/verify/',
    scope: 'organization:write',
    success: 200,
    prepare: async (f, o) => ({ path: `${org(o)}/domains/${(await newDomain(f, o)).id}/verify/` }),
  },
  // invites
  { method: 'GET', route: '/api/organizations/:organization_id/invites/', scope: 'organization_member:read', success: 200, prepare: (_f, o) => ({ path: `${org(o)}/invites/` }) },
  {
    method: 'POST',
    route: '/api/organizations/:organization_id/invites/',
    scope: 'organization_member:write',
    success: 201,
    prepare: (_f, o) => ({ path: `${org(o)}/invites/`, body: { target_email: `new${unique()}@example.com` } }),
  },
  {
    method: 'POST',
    route: '/api/organizations/:organization_id/invites/bulk/',
    scope: 'organization_member:write',
    success: 200,
    prepare: (_f, o) => ({ path: `${org(o)}/invites/bulk/`, body: [{ target_email: `b${unique()}@example.com` }, { target_email: `b${unique()}@example.com` }] }),
  },
  {
    method: 'DELETE',
    route: '/api/organizations/:organization_id/invites/:id/',
    scope: 'organization_member:write',
    success: 204,
    prepare: async (f, o) => ({ path: `${org(o)}/invites/${(await newInvite(f, o)).id}/` }),
  },
  // members
  { method: 'GET', route: '/api/organizations/:organization_id/members/', scope: 'organization_member:read', success: 200, prepare: (_f, o) => ({ path: `${org(o)}/members/` }) },
  {
    method: 'PATCH',
    route: '/api/organizations/:organization_id/members/:user__uuid/',
    scope: 'organization_member:write',
    success: 200,
    prepare: async (f, o) => ({ path: `${org(o)}/members/${(await newMember(f, o)).uuid}/`, body: { level: 8 } }),
  },
  {
    method: 'DELETE',
    route: '/api/organizations/:organization_id/members/:user__uuid/',
    scope: 'organization_member:write',
    success: 204,
    prepare: async (f, o) => ({ path: `${org(o)}/members/${(await newMember(f, o)).uuid}/` }),
  },
  // projects
  { method: 'GET', route: '/api/projects/', scope: 'project:read', success: 200, global: true, prepare: () => ({ path: '/api/projects/' }) },
  { method: 'GET', route: '/api/projects/:id/', scope: 'project:read', success: 200, prepare: (_f, o) => ({ path: `/api/projects/${o.projectId}/` }) },
  {
    method: 'PATCH',
    route: '/api/projects/:id/',
    scope: 'project:write',
    success: 200,
    prepare: async (f, o) => ({ path: `/api/projects/${(await newProject(f, o)).id}/`, body: { name: `renamed ${unique()}` } }),
  },
  {
    method: 'PATCH',
    route: '/api/projects/:id/reset_token/',
    scope: 'project:write',
    success: 200,
    prepare: async (f, o) => ({ path: `/api/projects/${(await newProject(f, o)).id}/reset_token/` }),
  },
  {
    method: 'DELETE',
    route: '/api/projects/:id/',
    scope: 'project:write',
    success: 204,
    prepare: async (f, o) => ({ path: `/api/projects/${(await newProject(f, o)).id}/` }),
  },
  {
    method: 'GET',
    route: '/api/organizations/:organization_id/projects/',
    scope: 'project:read',
    success: 200,
    prepare: (_f, o) => ({ path: `${org(o)}/projects/` }),
  },
  {
    method: 'POST',
    route: '/api/organizations/:organization_id/projects/',
    scope: 'project:write',
    success: 201,
    prepare: (_f, o) => ({ path: `${org(o)}/projects/`, body: { name: `new ${unique()}` } }),
  },
  // batch exports
  { method: 'GET', route: exportsBase, scope: 'batch_export:read', success: 200, prepare: (_f, o) => ({ path: `${org(o)}/batch_exports/` }) },
  {
    method: 'POST',
    route: exportsBase,
    scope: 'batch_export:write',
    success: 201,
    prepare: (_f, o) => ({ path: `${org(o)}/batch_exports/`, body: { name: `x${unique()}`, destination: { type: 'NoOp', config: {} }, interval: 'day' } }),
  },
  { method: 'GET', route: `${exportsBase}:id/`, scope: 'batch_export:read', success: 200, prepare: async (f, o) => ({ path: await exportItem(f, o) }) },
  { method: 'PATCH', route: `${exportsBase}:id/`, scope: 'batch_export:write', success: 200, prepare: async (f, o) => ({ path: await exportItem(f, o), body: { name: 'renamed' } }) },
  { method: 'DELETE', route: `${exportsBase}:id/`, scope: 'batch_export:write', success: 204, prepare: async (f, o) => ({ path: await exportItem(f, o) }) },
  {
    method: 'POST',
    route: `${exportsBase}:id/backfill/`,
    scope: 'batch_export:write',
    success: 200,
    prepare: async (f, o) => ({ path: `${await exportItem(f, o)}backfill/`, body: { start_at: '2024-01-01T00:00:00Z', end_at: '2024-01-01T03:00:00Z' } }),
  },
  { method: 'GET', route: `${exportsBase}:id/logs/`, scope: 'batch_export:read', success: 200, prepare: async (f, o) => ({ path: `${await exportItem(f, o)}logs/` }) },
  { method: 'POST', route: `${exportsBase}:id/pause/`, scope: 'batch_export:write', success: 200, prepare: async (f, o) => ({ path: `${await exportItem(f, o)}pause/` }) },
  { method: 'POST', route: `${exportsBase}:id/unpause/`, scope: 'batch_export:write', success: 200, prepare: async (f, o) => ({ path: `${await exportItem(f, o)}unpause/` }) },
  // pipeline plugins
  ...COLLECTIONS.flatMap(pluginCases),
  // plugin configs
  { method: 'GET', route: configsBase, scope: 'plugin:read', success: 200, prepare: (_f, o) => ({ path: `/api/projects/${o.projectId}/plugin_configs/` }) },
  {
    method: 'POST',
    route: configsBase,
    scope: 'plugin:write',
    success: 201,
    prepare: async (f, o) => ({ path: `/api/projects/${o.projectId}/plugin_configs/`, body: { plugin: (await newPlugin(f, o)).id, order: 3 } }),
  },
  { method: 'GET', route: `${configsBase}:id/`, scope: 'plugin:read', success: 200, prepare: async (f, o) => ({ path: await configItem(f, o) }) },
  { method: 'PATCH', route: `${configsBase}:id/`, scope: 'plugin:write', success: 200, prepare: async (f, o) => ({ path: await configItem(f, o), body: { order: 7 } }) },
  { method: 'DELETE', route: `${configsBase}:id/`, scope: 'plugin:write', success: 204, prepare: async (f, o) => ({ path: await configItem(f, o) }) },
  { method: 'GET', route: `${configsBase}:id/activity/`, scope: 'plugin:read', success: 200, prepare: async (f, o) => ({ path: `${await configItem(f, o)}activity/` }) },
  { method: 'GET', route: `${configsBase}:id/frontend/`, scope: 'plugin:read', success: 200, prepare: async (f, o) => ({ path: `${await configItem(f, o)}frontend/` }) },
  {
    method: 'POST',
    route: `${configsBase}:id/job/`,
    scope: 'plugin:write',
    success: 200,
    prepare: async (f, o) => ({ path: `${await configItem(f, o)}job/`, body: { job: { type: 'exportEvents', payload: {} } } }),
  },
  { method: 'POST', route: `${configsBase}:id/migrate/`, scope: 'plugin:write', success: 200, prepare: async (f, o) => ({ path: `${await configItem(f, o)}migrate/` }) },
  {
    method: 'GET',
    route: `${configsBase}:plugin_config_id/logs/`,
    scope: 'plugin:read',
    success: 200,
    prepare: async (f, o) => ({ path: `${await configItem(f, o)}logs/` }),
  },
  {
    method: 'PATCH',
    route: `${configsBase}rearrange/`,
    scope: 'plugin:write',
    success: 200,
    prepare: async (f, o) => {
      const config = await newPluginConfig(f, o);
      return { path: `/api/projects/${o.projectId}/plugin_configs/rearrange/`, body: { orders: { [config.id]: 2 } } };
    },
  },
];

/** Everything in the admin tables, for before/after comparisons (key use times excluded). */
export async function snapshotAdminTables(f: AdminFixture): Promise<Record<string, unknown[]>> {
  // nats_outbox is left out: its rows are transient (published and deleted within moments).
  const tables = [
    'users',
    'organizations',
    'organization_memberships',
    'projects',
    'organization_invites',
    'organization_domains',
    'admin_bootstrap',
    'batch_exports',
    'batch_export_backfills',
    'batch_export_runs',
    'batch_export_log_entries',
    'plugins',
    'plugin_source_files',
    'plugin_configs',
    'plugin_log_entries',
    'plugin_jobs',
    'activity_log',
  ];
  const out: Record<string, unknown[]> = {};
  for (const t of tables) out[t] = (await f.db.query(`select * from ${t} order by 1, 2`)).rows;
  out.personal_api_keys = (await f.db.query('select id, user_id, scopes, scoped_organizations, secure_value from personal_api_keys order by id')).rows;
  return out;
}

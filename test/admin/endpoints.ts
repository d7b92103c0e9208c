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
];

/** Everything in the admin tables, for before/after comparisons (key use times excluded). */
export async function snapshotAdminTables(f: AdminFixture): Promise<Record<string, unknown[]>> {
  const tables = ['users', 'organizations', 'organization_memberships', 'projects', 'organization_invites', 'organization_domains', 'admin_bootstrap'];
  const out: Record<string, unknown[]> = {};
  for (const t of tables) out[t] = (await f.db.query(`select * from ${t} order by 1`)).rows;
  out.personal_api_keys = (await f.db.query('select id, user_id, scopes, scoped_organizations, secure_value from personal_api_keys order by id')).rows;
  return out;
}

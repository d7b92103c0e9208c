import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAdminFixture, type AdminFixture, type TestUser } from '../test/admin/harness.js';
import { runAdminCli } from './index.js';
import { organizationSchema, paginatedOrganizations } from './schemas.js';

let f: AdminFixture;
let owner: TestUser;

beforeAll(async () => {
  f = await startAdminFixture();
  owner = await f.newUser('owner@example.com', { organizationName: 'First Org' });
});
afterAll(async () => f?.stop());

describe('organizations', () => {
  it('organizations - list shows the member organizations with computed fields', async () => {
    const res = await f.api('GET', '/api/organizations/', { key: owner.key });
    expect(res.status).toBe(200);
    const page = paginatedOrganizations.parse(res.body);
    expect(page.count).toBe(1);
    expect(page.results[0]).toMatchObject({
      id: owner.organizationId,
      name: 'First Org',
      slug: 'first-org',
      membership_level: 15,
      plugins_access_level: 9,
      member_count: '1',
      available_product_features: [],
    });
    expect(page.results[0]!.teams).toEqual([
      expect.objectContaining({ id: owner.projectId, name: 'Default project', api_token: owner.projectApiKey, organization: owner.organizationId }),
    ]);
  });

  it('organizations - create makes the caller owner, derives the slug and adds a default project', async () => {
    const res = await f.api('POST', '/api/organizations/', {
      key: owner.key,
      body: { name: 'Acme Analytics', enforce_2fa: true, is_member_join_email_enabled: false },
    });
    expect(res.status).toBe(201);
    const org = organizationSchema.parse(res.body);
    expect(org).toMatchObject({ name: 'Acme Analytics', slug: 'acme-analytics', membership_level: 15, enforce_2fa: true, member_count: '1' });
    expect(org.is_member_join_email_enabled).toBe(false);
    expect(org.teams).toHaveLength(1);
    const members = await f.api('GET', `/api/organizations/${org.id}/members/`, { key: owner.key });
    expect(members.body.results.map((m: { user: { email: string }; level: number }) => [m.user.email, m.level])).toEqual([['owner@example.com', 15]]);
    const project = await f.api('GET', `/api/projects/${org.teams[0]!.id as number}/`, { key: owner.key });
    expect(project.status).toBe(200);
  });

  it('organizations - a new organization configures plugins but cannot install them (level 3) until the operator allows it', async () => {
    const org = (await f.api('POST', '/api/organizations/', { key: owner.key, body: { name: 'Tenant' } })).body;
    expect(org.plugins_access_level).toBe(3);
    const destinations = `/api/organizations/${org.id}/pipeline_destinations/`;
    expect((await f.api('GET', destinations, { key: owner.key })).status).toBe(200);
    const refused = await f.api('POST', destinations, { key: owner.key, body: { name: 'Own code' } });
    expect(refused.status).toBe(403);
    expect(refused.body.detail).toBe("Your organization's plugin access level is insufficient.");

    const cli = async (args: string[]) => {
      const out: string[] = [];
      const err: string[] = [];
      const code = await runAdminCli(args, { out: (l) => out.push(l), err: (l) => err.push(l), env: { DATABASE_URL: f.databaseUrl } });
      return { code, out, err: err.join('\n') };
    };
    expect((await cli(['organization', '--id', org.id, '--plugins-access-level', '7'])).code).toBe(2);
    expect((await cli(['organization', '--id', '00000000-0000-4000-8000-000000000000', '--plugins-access-level', '6'])).code).toBe(1);
    const raised = await cli(['organization', '--id', org.id, '--plugins-access-level', '6']);
    expect(raised).toMatchObject({ code: 0, out: ['Tenant (' + String(org.id) + '): plugins_access_level 3 -> 6', '6'] });

    expect((await f.api('GET', `/api/organizations/${org.id}/`, { key: owner.key })).body.plugins_access_level).toBe(6);
    expect((await f.api('POST', destinations, { key: owner.key, body: { name: 'Own code' } })).status).toBe(201);
    const global = await f.api('POST', destinations, { key: owner.key, body: { name: 'For everyone', is_global: true } });
    expect(global.status).toBe(403);
    expect(global.body.detail).toBe("This organization can't manage global plugins!");
  });

  it('organizations - equal names get distinct slugs, also when created concurrently', async () => {
    const results = await Promise.all(
      Array.from({ length: 8 }, () => f.api('POST', '/api/organizations/', { key: owner.key, body: { name: 'Same Name' } })),
    );
    expect(results.map((r) => r.status)).toEqual(Array(8).fill(201));
    const slugs = results.map((r) => r.body.slug as string);
    expect(new Set(slugs).size).toBe(8);
    expect(slugs).toContain('same-name');
    for (const s of slugs) expect(s).toMatch(/^same-name(-[A-Za-z]{4})?$/);
  });

  it('organizations - retrieve by id and by @current', async () => {
    const byId = await f.api('GET', `/api/organizations/${owner.organizationId}/`, { key: owner.key });
    expect(byId.status).toBe(200);
    expect(byId.body.id).toBe(owner.organizationId);
    const current = await f.api('GET', '/api/organizations/@current/', { key: owner.key });
    expect(current.status).toBe(200);
    expect(current.body.id).toBe(owner.organizationId);
  });

  it('organizations - unknown and malformed ids answer 404 not_found', async () => {
    for (const id of ['00000000-0000-4000-8000-000000000000', 'not-a-uuid', '1']) {
      const res = await f.api('GET', `/api/organizations/${id}/`, { key: owner.key });
      expect(res.status, id).toBe(404);
      expect(res.body).toEqual({ type: 'invalid_request', code: 'not_found', detail: 'Not found.', attr: null });
    }
  });

  it('organizations - patch changes writable fields and updated_at, ignores read-only ones', async () => {
    const org = (await f.api('POST', '/api/organizations/', { key: owner.key, body: { name: 'Patch Me' } })).body;
    const logo = '0190a3f0-0000-7000-8000-000000000001';
    const res = await f.api('PATCH', `/api/organizations/${org.id}/`, {
      key: owner.key,
      body: { name: 'Patched', logo_media_id: logo, enforce_2fa: false, slug: 'hacked', membership_level: 1, member_count: '99' },
    });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ name: 'Patched', slug: 'patch-me', logo_media_id: logo, enforce_2fa: false, membership_level: 15, member_count: '1' });
    expect(Date.parse(res.body.updated_at)).toBeGreaterThanOrEqual(Date.parse(org.updated_at));
    const cleared = await f.api('PATCH', `/api/organizations/${org.id}/`, { key: owner.key, body: { logo_media_id: null } });
    expect(cleared.body.logo_media_id).toBeNull();
    const empty = await f.api('PATCH', `/api/organizations/${org.id}/`, { key: owner.key });
    expect(empty.status).toBe(200);
    expect(empty.body.name).toBe('Patched');
  });

  it('organizations - invalid bodies answer 400 validation_error naming the field', async () => {
    const cases: Array<[unknown, string | null, string]> = [
      [{}, 'name', 'This field is required.'],
      [{ name: '' }, 'name', 'This field may not be blank.'],
      [{ name: 'x'.repeat(65) }, 'name', 'Ensure this field has no more than 64 characters.'],
      [{ name: 'ok', logo_media_id: 'x' }, 'logo_media_id', 'Must be a valid UUID.'],
      [{ name: 'ok', is_member_join_email_enabled: 'yes' }, 'is_member_join_email_enabled', 'Must be a valid boolean.'],
      [['name'], null, 'Invalid data. Expected a dictionary, but got list.'],
    ];
    for (const [body, attr, detail] of cases) {
      const res = await f.api('POST', '/api/organizations/', { key: owner.key, body });
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body).toEqual({ type: 'validation_error', code: 'validation_error', detail, attr });
    }
    const patch = await f.api('PATCH', `/api/organizations/${owner.organizationId}/`, { key: owner.key, body: { name: 7 } });
    expect(patch.status).toBe(400);
    expect(patch.body.attr).toBe('name');
  });

  it('organizations - SQL metacharacters and Unicode are stored and returned verbatim', async () => {
    const names = ["Robert'); DROP TABLE organizations;--", 'Ünïcödé 日本語 🚀 emoji', '%_\\ $1 "quoted" \t tab', '  spaced  '];
    for (const name of names) {
      const created = await f.api('POST', '/api/organizations/', { key: owner.key, body: { name } });
      expect(created.status).toBe(201);
      expect(created.body.name).toBe(name);
      const read = await f.api('GET', `/api/organizations/${created.body.id}/`, { key: owner.key });
      expect(read.body.name).toBe(name);
    }
    expect((await f.db.query('select count(*)::int as n from organizations')).rows[0].n).toBeGreaterThan(names.length);
  });

  it('organizations - admins may patch but not delete; members may do neither', async () => {
    const org = (await f.api('POST', '/api/organizations/', { key: owner.key, body: { name: 'Levels' } })).body;
    const admin = await f.addMember(org.id, 'admin-levels@example.com', 8);
    const member = await f.addMember(org.id, 'member-levels@example.com', 1);
    const insufficient = { type: 'authentication_error', code: 'permission_denied', detail: 'Your organization access level is insufficient.', attr: null };

    expect((await f.api('PATCH', `/api/organizations/${org.id}/`, { key: admin.key, body: { name: 'By admin' } })).status).toBe(200);
    const memberPatch = await f.api('PATCH', `/api/organizations/${org.id}/`, { key: member.key, body: { name: 'By member' } });
    expect(memberPatch.status).toBe(403);
    expect(memberPatch.body).toEqual(insufficient);
    for (const who of [admin, member]) {
      const res = await f.api('DELETE', `/api/organizations/${org.id}/`, { key: who.key });
      expect(res.status).toBe(403);
      expect(res.body).toEqual(insufficient);
    }
    const read = await f.api('GET', `/api/organizations/${org.id}/`, { key: member.key });
    expect(read.body).toMatchObject({ name: 'By admin', membership_level: 1, member_count: '3' });
  });

  it('organizations - owners delete with 204 and an empty body; everything in it goes too', async () => {
    const org = (await f.api('POST', '/api/organizations/', { key: owner.key, body: { name: 'Doomed' } })).body;
    await f.api('POST', `/api/organizations/${org.id}/domains/`, { key: owner.key, body: { domain: 'doomed.example' } });
    await f.api('POST', `/api/organizations/${org.id}/invites/`, { key: owner.key, body: { target_email: 'x@doomed.example' } });
    const res = await f.api('DELETE', `/api/organizations/${org.id}/`, { key: owner.key });
    expect(res.status).toBe(204);
    expect(res.text).toBe('');
    expect((await f.api('GET', `/api/organizations/${org.id}/`, { key: owner.key })).status).toBe(404);
    for (const table of ['projects', 'organization_domains', 'organization_invites', 'organization_memberships']) {
      const { rows } = await f.db.query(`select count(*)::int as n from ${table} where organization_id = $1`, [org.id]);
      expect(rows[0].n, table).toBe(0);
    }
    expect((await f.api('DELETE', `/api/organizations/${org.id}/`, { key: owner.key })).status).toBe(404);
  });

  it('organizations - concurrent patches all succeed and the last committed one wins', async () => {
    const org = (await f.api('POST', '/api/organizations/', { key: owner.key, body: { name: 'Race' } })).body;
    const names = Array.from({ length: 12 }, (_, i) => `Race ${i}`);
    const results = await Promise.all(names.map((name) => f.api('PATCH', `/api/organizations/${org.id}/`, { key: owner.key, body: { name } })));
    expect(results.every((r) => r.status === 200)).toBe(true);
    const final = (await f.api('GET', `/api/organizations/${org.id}/`, { key: owner.key })).body.name;
    expect(names).toContain(final);
    // Updates are serialized and stamped when they run: the stored name is the newest response's.
    const newestAt = Math.max(...results.map((r) => Date.parse(r.body.updated_at)));
    const newest = results.filter((r) => Date.parse(r.body.updated_at) === newestAt).map((r) => r.body.name as string);
    expect(newest).toContain(final);
  });

  it('organizations - PUT and POST on an item are 405 with Allow', async () => {
    for (const method of ['PUT', 'POST']) {
      const res = await f.api(method, `/api/organizations/${owner.organizationId}/`, { key: owner.key, body: { name: 'x' } });
      expect(res.status).toBe(405);
      expect(res.body).toEqual({ type: 'invalid_request', code: 'method_not_allowed', detail: `Method "${method}" not allowed.`, attr: null });
      expect(res.headers.get('allow')).toBe('GET, PATCH, DELETE, HEAD');
    }
  });
});

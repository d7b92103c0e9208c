import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAdminFixture, type AdminFixture, type TestUser } from '../test/admin/harness.js';
import { memberSchema, paginatedMembers } from './schemas.js';

let f: AdminFixture;
beforeAll(async () => {
  f = await startAdminFixture();
});
afterAll(async () => f?.stop());

/** An organization with an owner, an admin and a member. */
async function team(tag: string) {
  const owner = await f.newUser(`owner-${tag}@members.example`);
  const admin = await f.addMember(owner.organizationId, `admin-${tag}@members.example`, 8);
  const member = await f.addMember(owner.organizationId, `member-${tag}@members.example`, 1);
  const path = (who: TestUser | string) => `/api/organizations/${owner.organizationId}/members/${typeof who === 'string' ? who : who.uuid}/`;
  return { owner, admin, member, org: owner.organizationId, path };
}

const denied = (detail: string) => ({ type: 'authentication_error', code: 'permission_denied', detail, attr: null });

describe('members', () => {
  it('members - list is newest first with embedded users; ?order=joined_at reverses', async () => {
    const t = await team('list');
    const res = await f.api('GET', `/api/organizations/${t.org}/members/`, { key: t.member.key });
    expect(res.status).toBe(200);
    const page = paginatedMembers.parse(res.body);
    expect(page.count).toBe(3);
    expect(page.results.map((m) => m.user.email)).toEqual([t.member.email, t.admin.email, t.owner.email]);
    expect(page.results[2]).toMatchObject({ level: 15, is_2fa_enabled: false, has_social_auth: false, user: { uuid: t.owner.uuid, id: t.owner.id } });
    const asc = await f.api('GET', `/api/organizations/${t.org}/members/?order=joined_at&limit=1&offset=1`, { key: t.member.key });
    expect(asc.body.results.map((m: { user: { email: string } }) => m.user.email)).toEqual([t.admin.email]);
    expect(asc.body.next).toContain('order=joined_at');
  });

  it('members - an owner changes levels; the answer is the updated member', async () => {
    const t = await team('patch');
    const res = await f.api('PATCH', t.path(t.member), { key: t.owner.key, body: { level: 8 } });
    expect(res.status).toBe(200);
    expect(memberSchema.parse(res.body)).toMatchObject({ level: 8, user: { uuid: t.member.uuid } });
    expect(Date.parse(res.body.updated_at)).toBeGreaterThanOrEqual(Date.parse(res.body.joined_at));
    expect((await f.api('PATCH', t.path(t.admin), { key: t.owner.key, body: { level: 15 } })).body.level).toBe(15);
  });

  it('members - nobody changes their own level', async () => {
    const t = await team('self');
    for (const who of [t.owner, t.admin, t.member]) {
      const res = await f.api('PATCH', t.path(who), { key: who.key, body: { level: 1 } });
      expect(res.status).toBe(403);
      expect(res.body).toEqual(denied("You can't change your own access level."));
    }
    expect((await f.api('PATCH', t.path('@me'), { key: t.admin.key, body: { level: 8 } })).body).toEqual(denied("You can't change your own access level."));
  });

  it('members - only owners make owners; nobody raises above their own level', async () => {
    const t = await team('raise');
    expect((await f.api('PATCH', t.path(t.member), { key: t.admin.key, body: { level: 15 } })).body).toEqual(
      denied("You can only make another member owner if you're this organization's owner."),
    );
    expect((await f.api('PATCH', t.path(t.admin), { key: t.member.key, body: { level: 8 } })).body).toEqual(
      denied('You can only change access level of others to lower or equal to your current one.'),
    );
  });

  it('members - members edit nobody; admins edit no one above them', async () => {
    const t = await team('edit');
    const other = await f.addMember(t.org, 'other-edit@members.example', 1);
    expect((await f.api('PATCH', t.path(other), { key: t.member.key, body: { level: 1 } })).body).toEqual(
      denied('You can only edit others if you are an admin.'),
    );
    expect((await f.api('PATCH', t.path(t.owner), { key: t.admin.key, body: { level: 8 } })).body).toEqual(
      denied('You can only edit others with level lower or equal to you.'),
    );
    expect((await f.api('PATCH', t.path(other), { key: t.admin.key, body: { level: 8 } })).status).toBe(200);
  });

  it('members - invalid level is 400 on level; unknown member is 404', async () => {
    const t = await team('invalid');
    for (const body of [{}, { level: 2 }, { level: '8' }, { level: null }]) {
      const res = await f.api('PATCH', t.path(t.member), { key: t.owner.key, body });
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body).toMatchObject({ code: 'validation_error', attr: 'level' });
    }
    for (const who of ['00000000-0000-4000-8000-000000000000', 'nope']) {
      expect((await f.api('PATCH', t.path(who), { key: t.owner.key, body: { level: 1 } })).status).toBe(404);
      expect((await f.api('DELETE', t.path(who), { key: t.owner.key })).status).toBe(404);
    }
  });

  it('members - admins remove members (204 empty); anyone may leave; members remove nobody', async () => {
    const t = await team('remove');
    const extra = await f.addMember(t.org, 'extra-remove@members.example', 1);
    expect((await f.api('DELETE', t.path(extra), { key: t.member.key })).body).toEqual(denied('You can only edit others if you are an admin.'));
    expect((await f.api('DELETE', t.path(t.owner), { key: t.admin.key })).body).toEqual(
      denied('You can only edit others with level lower or equal to you.'),
    );
    const removed = await f.api('DELETE', t.path(extra), { key: t.admin.key });
    expect(removed.status).toBe(204);
    expect(removed.text).toBe('');
    const left = await f.api('DELETE', t.path('@me'), { key: t.member.key });
    expect(left.status).toBe(204);
    // Gone members no longer see the organization at all.
    expect((await f.api('GET', `/api/organizations/${t.org}/`, { key: t.member.key })).status).toBe(404);
    expect((await f.api('GET', `/api/organizations/${t.org}/members/`, { key: t.owner.key })).body.count).toBe(2);
  });

  it('members - the last owner cannot leave or be removed; with two owners one may go', async () => {
    const t = await team('owners');
    const res = await f.api('DELETE', t.path(t.owner), { key: t.owner.key });
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ type: 'validation_error', code: 'validation_error', detail: 'Cannot leave the organization as its only owner!', attr: null });
    expect((await f.api('PATCH', t.path(t.admin), { key: t.owner.key, body: { level: 15 } })).status).toBe(200);
    expect((await f.api('DELETE', t.path(t.owner), { key: t.admin.key })).status).toBe(204);
    expect((await f.api('DELETE', t.path(t.admin), { key: t.admin.key })).status).toBe(400);
  });

  it('members - two owners demoting each other at once leave one owner', async () => {
    for (let round = 0; round < 5; round++) {
      const t = await team(`duel${round}`);
      await f.api('PATCH', t.path(t.admin), { key: t.owner.key, body: { level: 15 } });
      const [a, b] = await Promise.all([
        f.api('PATCH', t.path(t.admin), { key: t.owner.key, body: { level: 8 } }),
        f.api('PATCH', t.path(t.owner), { key: t.admin.key, body: { level: 8 } }),
      ]);
      expect([a.status, b.status].sort()).toEqual([200, 403]);
      const { rows } = await f.db.query('select count(*)::int as n from organization_memberships where organization_id = $1 and level = 15', [t.org]);
      expect(rows[0].n).toBe(1);
    }
  });

  it('members - two owners leaving at once leave one owner', async () => {
    const t = await team('leave-race');
    await f.api('PATCH', t.path(t.admin), { key: t.owner.key, body: { level: 15 } });
    const results = await Promise.all([
      f.api('DELETE', t.path('@me'), { key: t.owner.key }),
      f.api('DELETE', t.path('@me'), { key: t.admin.key }),
    ]);
    expect(results.map((r) => r.status).sort()).toEqual([204, 400]);
  });

  it('members - POST and PUT are 405', async () => {
    const t = await team('methods');
    expect((await f.api('POST', `/api/organizations/${t.org}/members/`, { key: t.owner.key, body: {} })).status).toBe(405);
    expect((await f.api('PUT', t.path(t.member), { key: t.owner.key, body: { level: 1 } })).status).toBe(405);
    expect((await f.api('GET', t.path(t.member), { key: t.owner.key })).status).toBe(405);
  });
});

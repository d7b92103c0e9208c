import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAdminFixture, type AdminFixture, type TestUser } from '../test/admin/harness.js';
import { startSmtpServer } from '../test/admin/smtp-server.js';
import { waitFor } from '../test/kit/index.js';
import { inviteSchema, paginatedInvites } from './schemas.js';

let f: AdminFixture;
let owner: TestUser;
const base = (org = owner.organizationId) => `/api/organizations/${org}/invites/`;

beforeAll(async () => {
  f = await startAdminFixture();
  owner = await f.newUser('owner@invites.example');
});
afterAll(async () => f?.stop());

async function invite(body: Record<string, unknown>, key = owner.key, org = owner.organizationId) {
  const res = await f.api('POST', base(org), { key, body });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return inviteSchema.parse(res.body);
}

describe('invites', () => {
  it('invites - create returns the invite with creator, defaults and no email attempt without SMTP', async () => {
    const inv = await invite({ target_email: 'New.Person@Example.COM', first_name: 'Nia', message: 'Welcome!' });
    expect(inv).toMatchObject({
      target_email: 'New.Person@example.com',
      first_name: 'Nia',
      level: 1,
      is_expired: false,
      emailing_attempt_made: false,
      message: 'Welcome!',
      private_project_access: [],
    });
    expect(inv.created_by).toMatchObject({ uuid: owner.uuid, email: owner.email, id: owner.id });
  });

  it('invites - first_name and message keep SQL metacharacters and Unicode verbatim', async () => {
    const message = "Bienvenue ✨ O'Reilly\n\"; DROP TABLE organization_invites; --\t%_\\";
    const inv = await invite({ target_email: 'verbatim@example.com', first_name: 'Zoë 李', message });
    expect(inv.first_name).toBe('Zoë 李');
    expect(inv.message).toBe(message);
    const listed = (await f.api('GET', base(), { key: owner.key })).body.results.find((i: { id: string }) => i.id === inv.id);
    expect(listed.message).toBe(message);
  });

  it('invites - list is newest first, paginated, and includes expired ones flagged is_expired', async () => {
    const org = (await f.api('POST', '/api/organizations/', { key: owner.key, body: { name: 'Invite list' } })).body.id as string;
    const a = await invite({ target_email: 'a@list.example' }, owner.key, org);
    const b = await invite({ target_email: 'b@list.example' }, owner.key, org);
    const c = await invite({ target_email: 'c@list.example' }, owner.key, org);
    await f.db.query("update organization_invites set created_at = now() - interval '3 days 1 minute' where id = $1", [a.id]);
    await f.db.query("update organization_invites set created_at = now() - interval '2 days 23 hours' where id = $1", [b.id]);
    const res = await f.api('GET', `${base(org)}?limit=2`, { key: owner.key });
    expect(res.status).toBe(200);
    const page = paginatedInvites.parse(res.body);
    expect(page.count).toBe(3);
    expect(page.results.map((i) => [i.id, i.is_expired])).toEqual([
      [c.id, false],
      [b.id, false],
    ]);
    const rest = paginatedInvites.parse((await f.api('GET', page.next!, { key: owner.key })).body);
    expect(rest.results.map((i) => [i.id, i.is_expired])).toEqual([[a.id, true]]);
  });

  it('invites - re-inviting an address replaces earlier invites (also expired ones)', async () => {
    const first = await invite({ target_email: 'again@example.com', level: 8 });
    await f.db.query("update organization_invites set created_at = now() - interval '10 days' where id = $1", [first.id]);
    const second = await invite({ target_email: 'AGAIN@example.com'.replace('AGAIN', 'again') });
    expect(second.id).not.toBe(first.id);
    const { rows } = await f.db.query('select id, level from organization_invites where lower(target_email) = $1', ['again@example.com']);
    expect(rows).toEqual([{ id: second.id, level: 1 }]);
  });

  it('invites - combine_pending_invites keeps the highest level and all project access', async () => {
    const org = (await f.api('POST', '/api/organizations/', { key: owner.key, body: { name: 'Combine' } })).body;
    const p1 = org.teams[0].id as number;
    const p2 = (await f.api('POST', `/api/organizations/${org.id}/projects/`, { key: owner.key, body: { name: 'second' } })).body.id as number;
    await invite({ target_email: 'combo@example.com', level: 8, private_project_access: [{ id: p1, level: 'admin' }] }, owner.key, org.id);
    const merged = await invite(
      { target_email: 'combo@example.com', level: 1, combine_pending_invites: true, private_project_access: [{ id: p1, level: 'member' }, { id: p2, level: 'member' }] },
      owner.key,
      org.id,
    );
    expect(merged.level).toBe(8);
    expect(merged.private_project_access).toEqual(expect.arrayContaining([{ id: p1, level: 'admin' }, { id: p2, level: 'member' }]));
    expect(merged.private_project_access).toHaveLength(2);
  });

  it('invites - private_project_access must name projects of this organization', async () => {
    const other = await f.newUser('other@invites.example');
    const res = await f.api('POST', base(), {
      key: owner.key,
      body: { target_email: 'ppa@example.com', private_project_access: [{ id: other.projectId, level: 'member' }] },
    });
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ code: 'validation_error', attr: 'private_project_access' });
    const bad = await f.api('POST', base(), { key: owner.key, body: { target_email: 'ppa@example.com', private_project_access: 'all' } });
    expect(bad.body).toMatchObject({ code: 'validation_error', attr: 'private_project_access' });
  });

  it('invites - inviting an existing member is 400 on target_email', async () => {
    await f.addMember(owner.organizationId, 'already@member.example', 1);
    const res = await f.api('POST', base(), { key: owner.key, body: { target_email: 'Already@MEMBER.example'.replace('Already', 'already') } });
    expect(res.status).toBe(400);
    expect(res.body).toEqual({
      type: 'validation_error',
      code: 'validation_error',
      detail: 'A user with this email address already belongs to the organization.',
      attr: 'target_email',
    });
  });

  it('invites - inviting above your own level is 403', async () => {
    const admin = await f.addMember(owner.organizationId, 'admin@invites.example', 8);
    const res = await f.api('POST', base(), { key: admin.key, body: { target_email: 'boss@example.com', level: 15 } });
    expect(res.status).toBe(403);
    expect(res.body).toEqual({
      type: 'authentication_error',
      code: 'permission_denied',
      detail: 'You cannot invite a user with a higher permission level than your own.',
      attr: null,
    });
    expect((await f.api('POST', base(), { key: admin.key, body: { target_email: 'peer@example.com', level: 8 } })).status).toBe(201);
  });

  it('invites - invalid bodies answer 400 validation_error naming the field', async () => {
    const cases: Array<[unknown, string]> = [
      [{}, 'target_email'],
      [{ target_email: 'nope' }, 'target_email'],
      [{ target_email: 'a@b.co', level: 2 }, 'level'],
      [{ target_email: 'a@b.co', first_name: 'x'.repeat(31) }, 'first_name'],
      [{ target_email: 'a@b.co', send_email: 'yes' }, 'send_email'],
      [{ target_email: 'a@b.co', private_project_access: [{ id: 1 }] }, 'private_project_access__0__level'],
    ];
    for (const [body, attr] of cases) {
      const res = await f.api('POST', base(), { key: owner.key, body });
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.code).toBe('validation_error');
      expect(res.body.attr).toBe(attr);
    }
  });

  it('invites - bulk creates all (200, empty body) and returns nothing', async () => {
    const org = (await f.api('POST', '/api/organizations/', { key: owner.key, body: { name: 'Bulk' } })).body.id as string;
    const body = Array.from({ length: 20 }, (_, i) => ({ target_email: `bulk${i}@example.com`, level: i % 2 === 0 ? 1 : 8 }));
    const res = await f.api('POST', `${base(org)}bulk/`, { key: owner.key, body });
    expect(res.status).toBe(200);
    expect(res.text).toBe('');
    const list = await f.api('GET', base(org), { key: owner.key });
    expect(list.body.count).toBe(20);
  });

  it('invites - bulk is all-or-nothing: one bad item creates none and names its index', async () => {
    const org = (await f.api('POST', '/api/organizations/', { key: owner.key, body: { name: 'Bulk fail' } })).body.id as string;
    const res = await f.api('POST', `${base(org)}bulk/`, {
      key: owner.key,
      body: [{ target_email: 'ok1@example.com' }, { target_email: 'ok2@example.com' }, { target_email: 'broken' }],
    });
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ type: 'validation_error', code: 'validation_error', detail: 'Enter a valid email address.', attr: '2__target_email' });
    await f.addMember(org, 'member@bulk.example', 1);
    const late = await f.api('POST', `${base(org)}bulk/`, {
      key: owner.key,
      body: [{ target_email: 'ok1@example.com' }, { target_email: 'member@bulk.example' }],
    });
    expect(late.status).toBe(400);
    expect(late.body.attr).toBe('1__target_email');
    expect((await f.api('GET', base(org), { key: owner.key })).body.count).toBe(0);
  });

  it('invites - bulk refuses more than 20 (max_length) and a non-array body', async () => {
    const tooMany = Array.from({ length: 21 }, (_, i) => ({ target_email: `many${i}@example.com` }));
    const res = await f.api('POST', `${base()}bulk/`, { key: owner.key, body: tooMany });
    expect(res.status).toBe(400);
    expect(res.body).toEqual({
      type: 'validation_error',
      code: 'max_length',
      detail: 'A maximum of 20 invites can be sent in a single request.',
      attr: null,
    });
    const notArray = await f.api('POST', `${base()}bulk/`, { key: owner.key, body: { target_email: 'x@example.com' } });
    expect(notArray.status).toBe(400);
    expect(notArray.body).toEqual({
      type: 'validation_error',
      code: 'validation_error',
      detail: 'This endpoint needs an array of data for bulk invite creation.',
      attr: null,
    });
  });

  it('invites - delete answers 204 empty, then 404; GET on an item is 405', async () => {
    const inv = await invite({ target_email: 'gone@example.com' });
    expect((await f.api('GET', `${base()}${inv.id}/`, { key: owner.key })).status).toBe(405);
    const res = await f.api('DELETE', `${base()}${inv.id}/`, { key: owner.key });
    expect(res.status).toBe(204);
    expect(res.text).toBe('');
    expect((await f.api('DELETE', `${base()}${inv.id}/`, { key: owner.key })).status).toBe(404);
    expect((await f.api('DELETE', `${base()}not-a-uuid/`, { key: owner.key })).status).toBe(404);
  });

  it('invites - concurrent invites of one address leave exactly one', async () => {
    const results = await Promise.all(
      Array.from({ length: 10 }, (_, i) => f.api('POST', base(), { key: owner.key, body: { target_email: 'race@example.com', first_name: `n${i}` } })),
    );
    expect(results.every((r) => r.status === 201)).toBe(true);
    const { rows } = await f.db.query('select first_name from organization_invites where target_email = $1', ['race@example.com']);
    expect(rows).toHaveLength(1);
  });

  it('invites - with SMTP configured, invites are emailed and emailing_attempt_made is true', async () => {
    await using smtp = await startSmtpServer();
    await using mailing = await startAdminFixture({ SMTP_URL: smtp.url, SMTP_FROM: 'Spate <spate@test.example>', INVITE_VALIDITY: '1h' });
    const u = await mailing.newUser('mailer@example.com', { organizationName: 'Mail Org' });
    const sent = await mailing.api('POST', `/api/organizations/${u.organizationId}/invites/`, {
      key: u.key,
      body: { target_email: 'friend@example.com', first_name: 'Fred', message: 'Join us ✉' },
    });
    expect(sent.status).toBe(201);
    expect(sent.body.emailing_attempt_made).toBe(true);
    const quiet = await mailing.api('POST', `/api/organizations/${u.organizationId}/invites/`, {
      key: u.key,
      body: { target_email: 'quiet@example.com', send_email: false },
    });
    expect(quiet.body.emailing_attempt_made).toBe(false);
    await waitFor('invite email', () => smtp.messages.length >= 1, 10_000);
    await new Promise((r) => setTimeout(r, 200));
    expect(smtp.messages).toHaveLength(1);
    const mail = smtp.messages[0]!;
    expect(mail.to).toEqual(['friend@example.com']);
    expect(mail.from).toBe('spate@test.example');
    expect(mail.raw).toContain('Mail Org');
    expect(mail.raw).toContain(sent.body.id);

    // INVITE_VALIDITY decides is_expired.
    await mailing.db.query("update organization_invites set created_at = now() - interval '61 minutes'");
    const list = await mailing.api('GET', `/api/organizations/${u.organizationId}/invites/`, { key: u.key });
    expect(list.body.results.every((i: { is_expired: boolean }) => i.is_expired)).toBe(true);
  });

  it('invites - invite emails are rate-limited per address (across organizations) and per organization: 429 with Retry-After', async () => {
    await using smtp = await startSmtpServer();
    await using mailing = await startAdminFixture({
      SMTP_URL: smtp.url,
      INVITE_EMAILS_PER_ORGANIZATION: '4',
      INVITE_EMAILS_PER_ADDRESS: '2',
      INVITE_EMAIL_WINDOW: '1h',
    });
    const a = await mailing.newUser('a@limits.example', { organizationName: 'A' });
    const b = await mailing.newUser('b@limits.example', { organizationName: 'B' });
    const send = (u: TestUser, body: unknown, bulk = false) =>
      mailing.api('POST', `/api/organizations/${u.organizationId}/invites/${bulk ? 'bulk/' : ''}`, { key: u.key, body });
    const throttled = (res: { status: number; headers: Headers; body: { type: string; code: string; detail: string } }, atLeast: number, atMost: number) => {
      expect(res.status).toBe(429);
      expect(res.body).toMatchObject({ type: 'throttled_error', code: 'throttled', attr: null });
      const seconds = Number(res.headers.get('retry-after'));
      expect(res.body.detail).toBe(`Request was throttled. Expected available in ${seconds} seconds.`);
      expect(seconds).toBeGreaterThanOrEqual(atLeast);
      expect(seconds).toBeLessThanOrEqual(atMost);
    };

    // One address: 2 emails, whoever sends them; a third (another organization, another casing) is refused.
    expect((await send(a, { target_email: 'target@victim.example' })).status).toBe(201);
    expect((await send(a, { target_email: 'target@victim.example' })).status).toBe(201);
    throttled(await send(b, { target_email: 'Target@Victim.example' }), 3590, 3600);
    // An invite that sends no email is not limited.
    expect((await send(b, { target_email: 'target@victim.example', send_email: false })).status).toBe(201);
    // The window slides: once the older email is 59 minutes old, it frees in about a minute.
    await mailing.db.query("update invite_emails set sent_at = now() - interval '59 minutes' where id = (select min(id) from invite_emails)");
    throttled(await send(b, { target_email: 'target@victim.example' }), 55, 61);

    // One organization: 4 emails to anyone (A has sent 2, the older of which frees first); a bulk
    // that would pass the limit creates nothing.
    expect((await send(a, { target_email: 'c@limits.example' })).status).toBe(201);
    const bulk = await send(a, [{ target_email: 'd@limits.example' }, { target_email: 'e@limits.example' }], true);
    throttled(bulk, 55, 61);
    const listed = (await mailing.api('GET', `/api/organizations/${a.organizationId}/invites/`, { key: a.key })).body.results.map((i: { target_email: string }) => i.target_email);
    expect(listed).not.toContain('d@limits.example');
    expect((await send(a, [{ target_email: 'd@limits.example' }], true)).status).toBe(200);
    throttled(await send(a, { target_email: 'e@limits.example' }), 55, 61);
    const tooMany = Array.from({ length: 5 }, (_, i) => ({ target_email: `many${i}@limits.example` }));
    throttled(await send(b, tooMany, true), 3600, 3600);
    // Deleting the organization does not reset what it counted against the address.
    expect((await mailing.api('DELETE', `/api/organizations/${b.organizationId}/`, { key: b.key })).status).toBe(204);
    const c = await mailing.newUser('c@limits.example', { organizationName: 'C' });
    throttled(await send(c, { target_email: 'target@victim.example' }), 55, 61);

    // Past the window, both limits allow again.
    await mailing.db.query("update invite_emails set sent_at = now() - interval '61 minutes'");
    expect((await send(a, { target_email: 'e@limits.example' })).status).toBe(201);
    expect((await send(c, { target_email: 'target@victim.example' })).status).toBe(201);

    // What reached the mail server: exactly the invites answered with an email.
    await waitFor('invite emails', () => smtp.messages.length >= 6, 10_000);
    await new Promise((r) => setTimeout(r, 300));
    const to = smtp.messages.flatMap((m) => m.to).map((t) => t.toLowerCase()).sort();
    expect(to).toEqual(['c@limits.example', 'd@limits.example', 'e@limits.example', 'target@victim.example', 'target@victim.example', 'target@victim.example']);
  });
});

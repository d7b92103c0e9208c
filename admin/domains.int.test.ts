import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAdminFixture, type AdminFixture, type TestUser } from '../test/admin/harness.js';
import { startDnsServer, type TestDnsServer } from '../test/admin/dns-server.js';
import { domainSchema, paginatedDomains } from './schemas.js';

let f: AdminFixture;
let dns: TestDnsServer;
let owner: TestUser;
const base = () => `/api/organizations/${owner.organizationId}/domains/`;

beforeAll(async () => {
  dns = await startDnsServer();
  f = await startAdminFixture({ DNS_RESOLVER: dns.address, DNS_TIMEOUT: '500ms' });
  owner = await f.newUser('owner@domains.example');
});
afterAll(async () => {
  await f?.stop();
  await dns?.stop();
});

async function addDomain(domain: string, key = owner.key, body: Record<string, unknown> = {}) {
  const res = await f.api('POST', base(), { key, body: { domain, ...body } });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return domainSchema.parse(res.body);
}

describe('domains', () => {
  it('domains - create generates a challenge; SSO fields are dropped until verified', async () => {
    const d = await addDomain('create.example.com', owner.key, {
      jit_provisioning_enabled: true,
      sso_enforcement: 'google-oauth2',
      saml_entity_id: 'entity',
    });
    expect(d).toMatchObject({
      domain: 'create.example.com',
      is_verified: false,
      verified_at: null,
      jit_provisioning_enabled: false,
      sso_enforcement: '',
      has_saml: false,
      saml_entity_id: 'entity',
      saml_acs_url: '',
    });
    expect(d.verification_challenge).toMatch(/^[A-Za-z0-9_-]{43}$/);
  });

  it('domains - list is ordered by domain and paginated; retrieve returns one', async () => {
    for (const name of ['zz.list.example', 'aa.list.example', 'mm.list.example']) await addDomain(name);
    const res = await f.api('GET', `${base()}?limit=2`, { key: owner.key });
    expect(res.status).toBe(200);
    const page = paginatedDomains.parse(res.body);
    const all = (await f.api('GET', base(), { key: owner.key })).body.results.map((d: { domain: string }) => d.domain);
    expect(all).toEqual([...all].sort());
    expect(page.results.map((d) => d.domain)).toEqual(all.slice(0, 2));
    expect(page.next).toContain('offset=2');
    const one = await f.api('GET', `${base()}${page.results[0]!.id}/`, { key: owner.key });
    expect(one.status).toBe(200);
    expect(one.body).toEqual(page.results[0]);
  });

  it('domains - invalid domains answer 400 validation_error on domain', async () => {
    for (const domain of ['Not A Domain', 'UPPER.example.com', 'localhost', 'x'.repeat(120) + '.example.com', '']) {
      const res = await f.api('POST', base(), { key: owner.key, body: { domain } });
      expect(res.status, domain).toBe(400);
      expect(res.body.code).toBe('validation_error');
      expect(res.body.attr).toBe('domain');
    }
    const missing = await f.api('POST', base(), { key: owner.key, body: {} });
    expect(missing.body).toEqual({ type: 'validation_error', code: 'validation_error', detail: 'This field is required.', attr: 'domain' });
  });

  it('domains - a domain is unique across organizations (400 unique)', async () => {
    await addDomain('taken.example.com');
    const other = await f.newUser('other@domains.example');
    for (const key of [owner.key, other.key]) {
      const org = key === owner.key ? owner.organizationId : other.organizationId;
      const res = await f.api('POST', `/api/organizations/${org}/domains/`, { key, body: { domain: 'taken.example.com' } });
      expect(res.status).toBe(400);
      expect(res.body).toEqual({ type: 'validation_error', code: 'unique', detail: 'domain with this domain already exists.', attr: 'domain' });
    }
  });

  it('domains - concurrent creation of one domain: exactly one wins, the rest get unique', async () => {
    const results = await Promise.all(Array.from({ length: 6 }, () => f.api('POST', base(), { key: owner.key, body: { domain: 'race.example.com' } })));
    expect(results.filter((r) => r.status === 201)).toHaveLength(1);
    expect(results.filter((r) => r.status === 400 && r.body.code === 'unique')).toHaveLength(5);
  });

  it('domains - SSO fields refused with verification_required until verified', async () => {
    const d = await addDomain('unverified.example.com');
    for (const [field, value] of [
      ['jit_provisioning_enabled', true],
      ['sso_enforcement', 'saml'],
    ] as const) {
      const res = await f.api('PATCH', `${base()}${d.id}/`, { key: owner.key, body: { [field]: value } });
      expect(res.status).toBe(400);
      expect(res.body).toEqual({
        type: 'validation_error',
        code: 'verification_required',
        detail: 'This attribute cannot be updated until the domain is verified.',
        attr: field,
      });
    }
    const saml = await f.api('PATCH', `${base()}${d.id}/`, {
      key: owner.key,
      body: { saml_entity_id: 'https://idp/entity', saml_acs_url: 'https://idp/acs', saml_x509_cert: '-----BEGIN CERTIFICATE-----\nMII…\n-----END CERTIFICATE-----', domain: 'changed.example.com' },
    });
    expect(saml.status).toBe(200);
    expect(saml.body).toMatchObject({ has_saml: true, domain: 'unverified.example.com', saml_entity_id: 'https://idp/entity' });
  });

  it('domains - SAML fields keep SQL metacharacters and Unicode verbatim', async () => {
    const d = await addDomain('verbatim.example.com');
    const cert = "-----BEGIN CERTIFICATE-----\nMIIC'; DROP TABLE organization_domains;--\nÜñî 🔐\n-----END CERTIFICATE-----";
    const res = await f.api('PATCH', `${base()}${d.id}/`, { key: owner.key, body: { saml_x509_cert: cert, saml_entity_id: 'urn:ëntity:%_' } });
    expect(res.body).toMatchObject({ saml_x509_cert: cert, saml_entity_id: 'urn:ëntity:%_' });
    expect((await f.api('GET', `${base()}${d.id}/`, { key: owner.key })).body.saml_x509_cert).toBe(cert);
  });

  it('domains - verify: no record leaves it unverified (200, empty body)', async () => {
    const d = await addDomain('norecord.example.com');
    const res = await f.api('POST', `${base()}${d.id}/verify/`, { key: owner.key });
    expect(res.status).toBe(200);
    expect(res.text).toBe('');
    expect(dns.queries).toContain('_spate-challenge.norecord.example.com');
    const after = await f.api('GET', `${base()}${d.id}/`, { key: owner.key });
    expect(after.body).toMatchObject({ is_verified: false, verified_at: null });
    const { rows } = await f.db.query('select last_verification_retry from organization_domains where id = $1', [d.id]);
    expect(rows[0].last_verification_retry).not.toBeNull();
  });

  it('domains - verify: a TXT record with another value does not verify', async () => {
    const d = await addDomain('wrong.example.com');
    dns.setTxt('_spate-challenge.wrong.example.com', ['not-the-challenge', d.verification_challenge.slice(1)]);
    expect((await f.api('POST', `${base()}${d.id}/verify/`, { key: owner.key })).status).toBe(200);
    expect((await f.api('GET', `${base()}${d.id}/`, { key: owner.key })).body.is_verified).toBe(false);
  });

  it('domains - verify: the matching TXT record verifies, then SSO fields can be set, then already_verified', async () => {
    const d = await addDomain('match.example.com');
    dns.setTxt('_spate-challenge.match.example.com', ['v=other', d.verification_challenge]);
    const res = await f.api('POST', `${base()}${d.id}/verify/`, { key: owner.key });
    expect(res.status).toBe(200);
    expect(res.text).toBe('');
    const after = domainSchema.parse((await f.api('GET', `${base()}${d.id}/`, { key: owner.key })).body);
    expect(after.is_verified).toBe(true);
    expect(Date.parse(after.verified_at!)).toBeGreaterThan(Date.now() - 60_000);

    const sso = await f.api('PATCH', `${base()}${d.id}/`, { key: owner.key, body: { jit_provisioning_enabled: true, sso_enforcement: 'google-oauth2' } });
    expect(sso.status).toBe(200);
    expect(sso.body).toMatchObject({ jit_provisioning_enabled: true, sso_enforcement: 'google-oauth2' });

    const again = await f.api('POST', `${base()}${d.id}/verify/`, { key: owner.key });
    expect(again.status).toBe(400);
    expect(again.body).toEqual({ type: 'validation_error', code: 'already_verified', detail: 'This domain has already been verified.', attr: null });
  });

  it('domains - verify answers 503 verification_unavailable when DNS cannot be asked', async () => {
    await using broken = await startAdminFixture({ DNS_RESOLVER: '127.0.0.1:9', DNS_TIMEOUT: '200ms' });
    const u = await broken.newUser('dns-down@example.com');
    const d = (await broken.api('POST', `/api/organizations/${u.organizationId}/domains/`, { key: u.key, body: { domain: 'down.example.com' } })).body;
    const res = await broken.api('POST', `/api/organizations/${u.organizationId}/domains/${d.id}/verify/`, { key: u.key });
    expect(res.status).toBe(503);
    expect(res.body.code).toBe('verification_unavailable');
    expect(res.body.type).toBe('server_error');
  });

  it('domains - members can read; only admins and owners write or verify', async () => {
    const d = await addDomain('levels.example.com');
    const member = await f.addMember(owner.organizationId, 'member@domains.example', 1);
    const admin = await f.addMember(owner.organizationId, 'admin@domains.example', 8);
    expect((await f.api('GET', base(), { key: member.key })).status).toBe(200);
    expect((await f.api('GET', `${base()}${d.id}/`, { key: member.key })).status).toBe(200);
    const attempts = [
      () => f.api('POST', base(), { key: member.key, body: { domain: 'by-member.example.com' } }),
      () => f.api('PATCH', `${base()}${d.id}/`, { key: member.key, body: { saml_entity_id: 'x' } }),
      () => f.api('POST', `${base()}${d.id}/verify/`, { key: member.key }),
      () => f.api('DELETE', `${base()}${d.id}/`, { key: member.key }),
    ];
    for (const attempt of attempts) {
      const res = await attempt();
      expect(res.status).toBe(403);
      expect(res.body.detail).toBe('Your organization access level is insufficient.');
    }
    expect((await f.api('PATCH', `${base()}${d.id}/`, { key: admin.key, body: { saml_entity_id: 'by admin' } })).status).toBe(200);
    await f.db.query("delete from organization_memberships where user_id in ($1, $2)", [member.id, admin.id]);
  });

  it('domains - delete answers 204 with an empty body, then 404', async () => {
    const d = await addDomain('delete.example.com');
    const res = await f.api('DELETE', `${base()}${d.id}/`, { key: owner.key });
    expect(res.status).toBe(204);
    expect(res.text).toBe('');
    expect((await f.api('GET', `${base()}${d.id}/`, { key: owner.key })).status).toBe(404);
    expect((await f.api('DELETE', `${base()}${d.id}/`, { key: owner.key })).status).toBe(404);
    expect((await f.api('POST', `${base()}${d.id}/verify/`, { key: owner.key })).status).toBe(404);
  });

  it('domains - wrong methods are 405 (GET verify, PUT item)', async () => {
    const d = await addDomain('methods.example.com');
    expect((await f.api('GET', `${base()}${d.id}/verify/`, { key: owner.key })).status).toBe(405);
    expect((await f.api('PUT', `${base()}${d.id}/`, { key: owner.key, body: {} })).status).toBe(405);
    expect((await f.api('DELETE', base(), { key: owner.key })).status).toBe(405);
  });
});

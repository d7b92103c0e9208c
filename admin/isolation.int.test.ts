// Isolation: a key sees only its user's organizations (and, if scoped, only those). Everything
// of another organization answers 404 exactly as if it did not exist, and nothing changes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { endpointCases, snapshotAdminTables, type PreparedRequest } from '../test/admin/endpoints.js';
import { startDnsServer, type TestDnsServer } from '../test/admin/dns-server.js';
import { startAdminFixture, type AdminFixture, type TestUser } from '../test/admin/harness.js';

let f: AdminFixture;
let dns: TestDnsServer;
let victim: TestUser;
let attacker: TestUser;

beforeAll(async () => {
  dns = await startDnsServer();
  f = await startAdminFixture({ DNS_RESOLVER: dns.address });
  victim = await f.newUser('victim@isolation.example', { organizationName: 'Victim Org' });
  attacker = await f.newUser('attacker@isolation.example', { organizationName: 'Attacker Org' });
});
afterAll(async () => {
  await f?.stop();
  await dns?.stop();
});

const notFoundBody = { type: 'invalid_request', code: 'not_found', detail: 'Not found.', attr: null };

async function attemptEverything(key: string, allowedOrganizations: string[]): Promise<void> {
  const requests: Array<[(typeof endpointCases)[number], PreparedRequest]> = [];
  // Creating an organization of one's own touches nobody else; everything else is attempted.
  for (const endpoint of endpointCases.filter((e) => !(e.global && e.method === 'POST'))) {
    requests.push([endpoint, await endpoint.prepare(f, victim)]);
  }
  // Anything verify could see in DNS is there: a refused verify is isolation, not a missing record.
  const before = await snapshotAdminTables(f);

  for (const [endpoint, request] of requests) {
    const res = await f.api(endpoint.method, request.path, { key, body: request.body });
    const what = `${endpoint.method} ${request.path}`;
    if (!endpoint.global) {
      expect(res.status, what).toBe(404);
      expect(res.body, what).toEqual(notFoundBody);
    } else {
      expect(res.status, what).toBe(200);
      const orgs = res.body.results.map((r: { organization?: string; id: string }) => r.organization ?? r.id);
      for (const o of orgs) expect(allowedOrganizations, what).toContain(o);
      expect(orgs, what).not.toContain(victim.organizationId);
    }
  }
  const after = await snapshotAdminTables(f);
  expect(after).toEqual(before);
}

describe('isolation', () => {
  it("isolation - another user's key gets 404 for everything of the organization and changes nothing", async () => {
    await attemptEverything(attacker.key, [attacker.organizationId]);
  });

  it('isolation - even with the ids of real children (domains, invites, members, projects) in its own organization path', async () => {
    const domain = (await f.api('POST', `/api/organizations/${victim.organizationId}/domains/`, { key: victim.key, body: { domain: 'victim.example.com' } })).body;
    const invite = (await f.api('POST', `/api/organizations/${victim.organizationId}/invites/`, { key: victim.key, body: { target_email: 'x@victim.example' } })).body;
    const member = await f.addMember(victim.organizationId, 'member@victim.example', 1);
    const before = await snapshotAdminTables(f);
    const own = `/api/organizations/${attacker.organizationId}`;
    const attempts: Array<[string, string, unknown?]> = [
      ['GET', `${own}/domains/${domain.id}/`],
      ['PATCH', `${own}/domains/${domain.id}/`, { saml_entity_id: 'x' }],
      ['DELETE', `${own}/domains/${domain.id}/`],
      ['POST', `${own}/domains/${domain.id}/verify/`],
      ['DELETE', `${own}/invites/${invite.id}/`],
      ['PATCH', `${own}/members/${member.uuid}/`, { level: 8 }],
      ['DELETE', `${own}/members/${member.uuid}/`],
      ['PATCH', `${own}/members/${victim.uuid}/`, { level: 1 }],
    ];
    for (const [method, path, body] of attempts) {
      const res = await f.api(method, path, { key: attacker.key, body });
      expect(res.status, `${method} ${path}`).toBe(404);
      expect(res.body).toEqual(notFoundBody);
    }
    expect(await snapshotAdminTables(f)).toEqual(before);
  });

  it('isolation - a key scoped to one organization cannot reach its user\'s other organizations', async () => {
    const elsewhere = (await f.api('POST', '/api/organizations/', { key: victim.key, body: { name: 'Victim elsewhere' } })).body.id as string;
    const scoped = await f.newKey(victim.id, ['*'], [elsewhere]);
    await attemptEverything(scoped, [elsewhere]);
  });

  it('isolation - a removed member loses access at once', async () => {
    const member = await f.addMember(victim.organizationId, 'leaver@victim.example', 8);
    expect((await f.api('GET', `/api/organizations/${victim.organizationId}/`, { key: member.key })).status).toBe(200);
    expect((await f.api('DELETE', `/api/organizations/${victim.organizationId}/members/${member.uuid}/`, { key: victim.key })).status).toBe(204);
    await attemptEverything(member.key, []);
  });
});

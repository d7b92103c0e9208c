// The scope matrix: every endpoint × (its own scope, the read-only scope of its object, no
// scope, `*`), all with keys of an owner so only the scope decides.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { endpointCases } from '../test/admin/endpoints.js';
import { startDnsServer, type TestDnsServer } from '../test/admin/dns-server.js';
import { startAdminFixture, type AdminFixture, type TestUser } from '../test/admin/harness.js';
import { apiRoutes } from './routes/index.js';

let f: AdminFixture;
let dns: TestDnsServer;
let owner: TestUser;

beforeAll(async () => {
  dns = await startDnsServer();
  f = await startAdminFixture({ DNS_RESOLVER: dns.address });
  owner = await f.newUser('owner@scopes.example');
});
afterAll(async () => {
  await f?.stop();
  await dns?.stop();
});

describe('scope matrix', () => {
  it('scopes - the matrix covers every route of the server and states its scope', () => {
    const routes = apiRoutes.map((r) => `${r.method} ${r.path} ${r.scope}`).sort();
    const cases = endpointCases.map((c) => `${c.method} ${c.route} ${c.scope}`).sort();
    expect(cases).toEqual(routes);
  });

  for (const endpoint of endpointCases) {
    const [object, access] = endpoint.scope.split(':') as [string, 'read' | 'write'];
    const kinds: Array<[string, string[], boolean]> = [
      ['its scope', [endpoint.scope], true],
      ['read-only scope', [`${object}:read`], access === 'read'],
      ['no scope', [], false],
      ['an unrelated scope', [object === 'plugin' ? 'project:write' : 'plugin:write'], false],
      ['*', ['*'], true],
    ];
    for (const [kind, scopes, allowed] of kinds) {
      it(`scopes - ${endpoint.method} ${endpoint.route} with ${kind} → ${allowed ? endpoint.success : 403}`, async () => {
        const key = await f.newKey(owner.id, scopes);
        const request = await endpoint.prepare(f, owner);
        const expected = allowed ? endpoint.success : 403;
        const res = await f.api(endpoint.method, request.path, { key, body: request.body });
        expect(res.status, res.text).toBe(expected);
        if (!allowed) {
          expect(res.body).toEqual({
            type: 'authentication_error',
            code: 'permission_denied',
            detail: `API key missing required scope '${endpoint.scope}'`,
            attr: null,
          });
        }
      });
    }
  }
});

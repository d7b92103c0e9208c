import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAdminFixture, type AdminFixture, type TestUser } from '../test/admin/harness.js';
import { startAdmin } from './index.js';

let f: AdminFixture;
let owner: TestUser;

beforeAll(async () => {
  f = await startAdminFixture({ ADMIN_BODY_LIMIT: '64KiB' });
  owner = await f.newUser('owner@http.example');
});
afterAll(async () => f?.stop());

const notAuthenticated = { type: 'authentication_error', code: 'not_authenticated', detail: 'Authentication credentials were not provided.', attr: null };

describe('admin http', () => {
  it('auth - no key, a non-Bearer header or an OAuth token is 401 not_authenticated', async () => {
    const variants: Array<Record<string, string>> = [{}, { authorization: `Basic ${Buffer.from('a:b').toString('base64')}` }, { authorization: 'Bearer ' }, { authorization: 'Bearer pha_oauth' }, { authorization: owner.key }];
    for (const headers of variants) {
      const res = await f.api('GET', '/api/organizations/', { headers });
      expect(res.status, JSON.stringify(headers)).toBe(401);
      expect(res.body).toEqual(notAuthenticated);
    }
  });

  it('auth - an unknown key is 401 authentication_failed naming where it was found', async () => {
    const header = await f.api('GET', '/api/organizations/', { key: 'phx_unknown' });
    expect(header.status).toBe(401);
    expect(header.body).toEqual({
      type: 'authentication_error',
      code: 'authentication_failed',
      detail: 'Personal API key found in request Authorization header is invalid.',
      attr: null,
    });
    const query = await f.api('GET', '/api/organizations/?personal_api_key=phx_unknown');
    expect(query.body.detail).toBe('Personal API key found in request query string is invalid.');
    const body = await f.api('POST', '/api/organizations/', { body: { name: 'x', personal_api_key: 'phx_unknown' } });
    expect(body.body.detail).toBe('Personal API key found in request body is invalid.');
  });

  it('auth - the key may also come in the body or the query string; the header wins', async () => {
    expect((await f.api('GET', `/api/organizations/?personal_api_key=${owner.key}`)).status).toBe(200);
    const created = await f.api('POST', '/api/organizations/', { body: { name: 'Body key', personal_api_key: owner.key } });
    expect(created.status).toBe(201);
    expect((await f.api('GET', `/api/organizations/?personal_api_key=phx_bad`, { key: owner.key })).status).toBe(200);
    // Pagination links never repeat a key given in the query string.
    const page = await f.api('GET', `/api/organizations/?limit=1&personal_api_key=${owner.key}`);
    expect(page.body.next).toMatch(/[?&]offset=1/);
    expect(page.body.next).not.toContain('personal_api_key');
  });

  it('auth - a deleted key stops working at once', async () => {
    const key = await f.newKey(owner.id, ['*']);
    expect((await f.api('GET', '/api/organizations/', { key })).status).toBe(200);
    await f.db.query('delete from personal_api_keys where secure_value = $1', [`sha256$${(await import('node:crypto')).createHash('sha256').update(key).digest('hex')}`]);
    expect((await f.api('GET', '/api/organizations/', { key })).body.code).toBe('authentication_failed');
  });

  it('auth - a missing scope is 403 permission_denied naming the scope', async () => {
    const readOnly = await f.newKey(owner.id, ['organization:read']);
    const res = await f.api('POST', '/api/organizations/', { key: readOnly, body: { name: 'x' } });
    expect(res.status).toBe(403);
    expect(res.body).toEqual({
      type: 'authentication_error',
      code: 'permission_denied',
      detail: "API key missing required scope 'organization:write'",
      attr: null,
    });
    const none = await f.newKey(owner.id, []);
    expect((await f.api('GET', '/api/organizations/', { key: none })).body.detail).toBe("API key missing required scope 'organization:read'");
  });

  it('auth - scoped_organizations limits a key to those organizations (others are 404)', async () => {
    const second = (await f.api('POST', '/api/organizations/', { key: owner.key, body: { name: 'Second' } })).body;
    const scoped = await f.newKey(owner.id, ['*'], [second.id]);
    const list = await f.api('GET', '/api/organizations/', { key: scoped });
    expect(list.body.results.map((o: { id: string }) => o.id)).toEqual([second.id]);
    expect((await f.api('GET', `/api/organizations/${owner.organizationId}/`, { key: scoped })).status).toBe(404);
    expect((await f.api('GET', `/api/organizations/${owner.organizationId}/members/`, { key: scoped })).status).toBe(404);
    expect((await f.api('GET', `/api/projects/${owner.projectId}/`, { key: scoped })).status).toBe(404);
    const projects = await f.api('GET', '/api/projects/', { key: scoped });
    expect(projects.body.results.map((p: { organization: string }) => p.organization)).toEqual([second.id]);
    expect((await f.api('GET', '/api/organizations/@current/', { key: scoped })).body.id).toBe(second.id);
    expect((await f.api('PATCH', `/api/organizations/${owner.organizationId}/`, { key: scoped, body: { name: 'no' } })).status).toBe(404);
  });

  it('auth - last_used_at is recorded, at most once an hour', async () => {
    const key = await f.newKey(owner.id, ['organization:read']);
    await f.api('GET', '/api/organizations/', { key });
    const hash = `sha256$${(await import('node:crypto')).createHash('sha256').update(key).digest('hex')}`;
    const read = async () => (await f.db.query('select last_used_at from personal_api_keys where secure_value = $1', [hash])).rows[0].last_used_at as Date | null;
    let first: Date | null = null;
    for (let i = 0; i < 50 && first === null; i++) {
      first = await read();
      if (first === null) await new Promise((r) => setTimeout(r, 20));
    }
    expect(first).not.toBeNull();
    await f.api('GET', '/api/organizations/', { key });
    await new Promise((r) => setTimeout(r, 100));
    expect((await read())!.getTime()).toBe(first!.getTime());
  });

  it('routes - unknown paths are 404 not_found, with or without a key', async () => {
    for (const path of ['/api/nothing/', '/live/nothing', '/api/organizations/x/y/z/', '/api/organizations/%E0%A4%A/']) {
      for (const key of [undefined, owner.key]) {
        const res = await f.api('GET', path, { key });
        expect(res.status, path).toBe(404);
        expect(res.body).toEqual({ type: 'invalid_request', code: 'not_found', detail: 'Endpoint not found.', attr: null });
      }
    }
  });

  it('routes - an absurdly long id is 404 not_found, not a server error', async () => {
    for (const path of [`/api/organizations/${'a'.repeat(500)}/`, `/api/organizations/${owner.organizationId}/members/${'b'.repeat(300)}/`]) {
      const res = await f.api('GET', path, { key: owner.key });
      expect(res.status).toBe(404);
      expect(res.body).toEqual({ type: 'invalid_request', code: 'not_found', detail: 'Not found.', attr: null });
    }
  });

  it('routes - the trailing slash is optional', async () => {
    expect((await f.api('GET', '/api/organizations', { key: owner.key })).status).toBe(200);
    expect((await f.api('GET', `/api/organizations/${owner.organizationId}`, { key: owner.key })).status).toBe(200);
  });

  it('routes - a wrong method on a known path is 405 even without a key', async () => {
    const res = await f.api('DELETE', '/api/organizations/');
    expect(res.status).toBe(405);
    expect(res.body).toEqual({ type: 'invalid_request', code: 'method_not_allowed', detail: 'Method "DELETE" not allowed.', attr: null });
    expect(res.headers.get('allow')).toBe('GET, POST, HEAD');
  });

  it('bodies - anything but JSON is 415 unsupported_media_type', async () => {
    for (const contentType of ['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/xml']) {
      const res = await f.api('POST', '/api/organizations/', { key: owner.key, rawBody: 'name=x', headers: { 'content-type': contentType } });
      expect(res.status, contentType).toBe(415);
      expect(res.body).toEqual({ type: 'invalid_request', code: 'unsupported_media_type', detail: `Unsupported media type "${contentType}" in request.`, attr: null });
    }
    const noType = await fetch(`${f.url}/api/organizations/`, { method: 'POST', headers: { authorization: `Bearer ${owner.key}`, 'content-type': '' }, body: '{"name":"x"}' });
    expect(noType.status).toBe(415);
  });

  it('bodies - malformed JSON is 400 parse_error; JSON with a charset is fine', async () => {
    const res = await f.api('POST', '/api/organizations/', { key: owner.key, rawBody: '{"name": ', headers: { 'content-type': 'application/json' } });
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ type: 'invalid_request', code: 'parse_error', attr: null });
    expect(res.body.detail).toMatch(/^JSON parse error - /);
    const ok = await f.api('POST', '/api/organizations/', { key: owner.key, rawBody: '{"name":"Charset ✓"}', headers: { 'content-type': 'application/json; charset=utf-8' } });
    expect(ok.status).toBe(201);
    expect(ok.body.name).toBe('Charset ✓');
  });

  it('bodies - a body over ADMIN_BODY_LIMIT is 413 request_too_large', async () => {
    const res = await f.api('POST', '/api/organizations/', { key: owner.key, body: { name: 'x', padding: 'y'.repeat(70_000) } });
    expect(res.status).toBe(413);
    expect(res.body).toEqual({ type: 'invalid_request', code: 'request_too_large', detail: 'Request body is too large.', attr: null });
  });

  it('errors - an unexpected failure is 500 `error`, logged, with nothing leaked', async () => {
    const lines: string[] = [];
    const logger = pino({ level: 'error' }, new Writable({ write: (chunk: Buffer, _e, cb) => (lines.push(chunk.toString()), cb()) }));
    const second = await startAdmin(f.config, { logger });
    try {
      await f.db.query('alter table organization_domains rename to organization_domains_away');
      const res = await fetch(`${second.url}/api/organizations/${owner.organizationId}/domains/`, { headers: { authorization: `Bearer ${owner.key}` } });
      expect(res.status).toBe(500);
      expect(await res.json()).toEqual({ type: 'server_error', code: 'error', detail: 'A server error occurred.', attr: null });
      expect(lines.join('')).toContain('organization_domains');
    } finally {
      await f.db.query('alter table organization_domains_away rename to organization_domains');
      await second.stop();
    }
  });

  it('http - odd client input never yields a server error', async () => {
    const fuzzer = await f.newUser('fuzzer@http.example');
    const org = `/api/organizations/${fuzzer.organizationId}`;
    const exportId = (await f.api('POST', `${org}/batch_exports/`, { key: fuzzer.key, body: { name: 'f', interval: 'hour', destination: { type: 'NoOp', config: {} } } })).body.id;
    const pluginId = (await f.api('POST', `${org}/pipeline_destinations/`, { key: fuzzer.key, body: {} })).body.id;
    const configId = (await f.api('POST', `/api/projects/${fuzzer.projectId}/plugin_configs/`, { key: fuzzer.key, body: { plugin: pluginId, order: 1 } })).body.id;
    const configs = `/api/projects/${fuzzer.projectId}/plugin_configs`;
    const paths = [
      '/api/organizations/',
      `${org}/`,
      `${org}/domains/`,
      `${org}/invites/bulk/`,
      `${org}/members/@me/`,
      '/api/projects/0/',
      '/api/projects/-1/',
      `${org}/domains/%00/`,
      '/api/organizations/@current/invites/',
      `${org}/batch_exports/`,
      `${org}/batch_exports/${exportId}/`,
      `${org}/batch_exports/${exportId}/backfill/`,
      `${org}/pipeline_destinations/`,
      `${org}/pipeline_destinations/${pluginId}/`,
      `${org}/pipeline_destinations/${pluginId}/update_source/`,
      `${org}/pipeline_destinations/${pluginId}/upgrade/`,
      `${configs}/`,
      `${configs}/${configId}/`,
      `${configs}/${configId}/job/`,
      `${configs}/${configId}/logs/?type_filter=%00&after=9999-99-99&search=%25`,
      `${configs}/rearrange/`,
    ];
    const bodies = [
      '',
      '{}',
      '[]',
      'null',
      '1',
      '"x"',
      '{"name":{"$gt":""}}',
      '{"level":1e400}',
      '{"target_email":["a@b.co"]}',
      '{"domain":"' + 'x'.repeat(5000) + '"}',
      '\u0000',
      '{"__proto__":{"admin":true},"name":"p"}',
      '{"destination":{"type":"S3","config":{"__proto__":{"x":1}}},"start_at":"2024-02-30T00:00:00Z"}',
      '{"start_at":"2024-01-01T00:00:00Z","end_at":"2024-01-01T00:00:01+99:99"}',
      '{"orders":{"1":1e400,"99999999999":1}}',
      '{"job":{"type":"\\u0000","payload":[]}}',
      '{"plugin":99999999999,"order":1}',
      '{"plugin.json":"{\\"name\\":5}","x":null}',
      '{"capabilities":{"methods":null},"config_schema":null}',
      // Valid JSON that jsonb cannot store: NUL and a lone surrogate inside free-form objects.
      '{"metrics":{"a":"\\u0000"},"public_jobs":{"\\ud800":1},"config":{"k":"\\u0000"},"enabled":true}',
      '{"config_schema":[{"key":"\\udc00"}],"plugin.json":"{\\"name\\":\\"a\\\\u0000\\",\\"config\\":{\\"\\\\u0000\\":1}}"}',
    ];
    const types = ['application/json', 'application/json; charset=latin1', 'application/JSON', 'text/plain', 'application/json;;'];
    for (const path of paths) {
      for (const method of ['GET', 'POST', 'PATCH', 'DELETE', 'PUT']) {
        // Keep the organization (and so every deeper path) alive for the whole sweep.
        if (method === 'DELETE' && path === `${org}/`) continue;
        for (const body of method === 'GET' ? [''] : bodies) {
          for (const type of body === '' ? ['application/json'] : types) {
            const res = await f.api(method, path, { key: fuzzer.key, rawBody: body || undefined, headers: body ? { 'content-type': type } : {} });
            expect(res.status, `${method} ${path} ${type} ${body.slice(0, 40)}`).toBeLessThan(500);
            expect(res.status === 204 || res.body === undefined || typeof res.body === 'object', `${method} ${path}`).toBe(true);
          }
        }
      }
    }
  }, 120_000);

  it('ops - /_health and /metrics answer without a key', async () => {
    expect((await f.api('GET', '/_health')).body).toEqual({ status: 'ok' });
    const metrics = await f.api('GET', '/metrics');
    expect(metrics.status).toBe(200);
    expect(metrics.text).toContain('spate_admin_http_requests_total');
  });
});

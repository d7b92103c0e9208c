// Pagination of every list endpoint over HTTP: page walks forwards and backwards, edges.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAdminFixture, type AdminFixture, type TestUser } from '../test/admin/harness.js';

let f: AdminFixture;
let owner: TestUser;
let lists: Record<string, string>;
const N = 7;

beforeAll(async () => {
  f = await startAdminFixture();
  owner = await f.newUser('owner@pages.example');
  const org = `/api/organizations/${owner.organizationId}`;
  for (let i = 0; i < N - 1; i++) {
    await f.api('POST', '/api/organizations/', { key: owner.key, body: { name: `Page org ${i}` } });
    await f.api('POST', `${org}/projects/`, { key: owner.key, body: { name: `Page project ${i}` } });
    await f.addMember(owner.organizationId, `member${i}@pages.example`, 1);
  }
  for (let i = 0; i < N; i++) {
    await f.api('POST', `${org}/domains/`, { key: owner.key, body: { domain: `d${i}.pages.example` } });
    await f.api('POST', `${org}/invites/`, { key: owner.key, body: { target_email: `invite${i}@pages.example` } });
    await f.api('POST', `${org}/batch_exports/`, { key: owner.key, body: { name: `Export ${i}`, interval: 'hour', destination: { type: 'NoOp', config: {} } } });
    const plugin = (await f.api('POST', `${org}/pipeline_destinations/`, { key: owner.key, body: { name: `Plugin ${i}` } })).body;
    // Equal orders: the plugin id breaks the tie.
    await f.api('POST', `/api/projects/${owner.projectId}/plugin_configs/`, { key: owner.key, body: { plugin: plugin.id, order: i % 2 } });
  }
  await f.db.query("update batch_exports set created_at = '2024-01-01T00:00:00Z'");
  // Same timestamps must not break the order: the id tiebreaker keeps it stable.
  await f.db.query("update organization_invites set created_at = '2024-01-01T00:00:00Z'");
  await f.db.query("update organization_memberships set joined_at = '2024-01-01T00:00:00Z' where organization_id = $1", [owner.organizationId]);
  lists = {
    organizations: '/api/organizations/',
    domains: `${org}/domains/`,
    invites: `${org}/invites/`,
    members: `${org}/members/`,
    projects: '/api/projects/',
    'organization projects': `${org}/projects/`,
    'batch exports': `${org}/batch_exports/`,
    'pipeline destinations': `${org}/pipeline_destinations/`,
    'plugin configs': `/api/projects/${owner.projectId}/plugin_configs/`,
  };
});
afterAll(async () => f?.stop());

/** Each new organization brings a default project, so /api/projects/ sees those too. */
const countOf = (name: string) => (name === 'projects' ? 2 * N - 1 : N);
const ids = (body: { results: Array<{ id: string | number }> }) => body.results.map((r) => r.id);

describe('pagination', () => {
  it('pagination - every list has count, next, previous and at most 100 results by default', async () => {
    for (const [name, path] of Object.entries(lists)) {
      const res = await f.api('GET', path, { key: owner.key });
      expect(res.status, name).toBe(200);
      expect(res.body, name).toMatchObject({ count: countOf(name), next: null, previous: null });
      expect(res.body.results, name).toHaveLength(countOf(name));
    }
  });

  it('pagination - limit 1: next links walk every item once in order, previous links walk back', async () => {
    for (const [name, path] of Object.entries(lists)) {
      const all = ids((await f.api('GET', path, { key: owner.key })).body);
      const forward: Array<string | number> = [];
      let url: string | null = `${f.url}${path}?limit=1`;
      // eslint-disable-next-line @typescript-eslint/no-explicit-any -- checked by the assertions below
      let last: any;
      while (url) {
        last = (await f.api('GET', url, { key: owner.key })).body;
        expect(last.count, name).toBe(countOf(name));
        forward.push(...ids(last));
        url = last.next;
      }
      expect(forward, name).toEqual(all);
      const backward: Array<string | number> = [];
      url = last.previous;
      while (url) {
        // eslint-disable-next-line @typescript-eslint/no-explicit-any -- checked by the assertions below
        const page: any = (await f.api('GET', url, { key: owner.key })).body;
        backward.unshift(...ids(page));
        url = page.previous;
      }
      expect(backward, name).toEqual(all.slice(0, -1));
    }
  });

  it('pagination - next/previous are absolute URLs of the request, other parameters kept', async () => {
    const res = await f.api('GET', `${lists.members!}?order=joined_at&limit=2&offset=2`, { key: owner.key });
    expect(res.body.next).toBe(`${f.url}${lists.members!}?limit=2&offset=4&order=joined_at`);
    expect(res.body.previous).toBe(`${f.url}${lists.members!}?limit=2&order=joined_at`);
    const mid = await f.api('GET', `${lists.domains!}?limit=2&offset=5`, { key: owner.key });
    expect(mid.body.previous).toBe(`${f.url}${lists.domains!}?limit=2&offset=3`);
    expect(mid.body.next).toBeNull();
  });

  it('pagination - offset past the end gives no results but the count and a previous link', async () => {
    for (const [name, path] of Object.entries(lists)) {
      const res = await f.api('GET', `${path}?offset=50&limit=10`, { key: owner.key });
      expect(res.status, name).toBe(200);
      expect(res.body, name).toEqual({ count: countOf(name), next: null, previous: `${f.url}${path}?limit=10&offset=40`, results: [] });
    }
  });

  it('pagination - bad limits fall back to 100 and bad offsets to 0', async () => {
    for (const query of ['limit=0', 'limit=-3', 'limit=abc', 'limit=', 'offset=-1', 'offset=zz', 'limit=1e2', 'offset=99999999999999999999999&limit=1']) {
      const res = await f.api('GET', `${lists.invites!}?${query}`, { key: owner.key });
      expect(res.status, query).toBe(200);
      if (query.startsWith('offset=9999')) expect(res.body.results, query).toHaveLength(0);
      else expect(res.body.results, query).toHaveLength(N);
    }
  });

  it('pagination - a limit above 1,000 answers 1,000 results, and the links walk the rest at 1,000', async () => {
    const big = await f.newUser('owner@big.pages.example');
    await f.db.query(
      `insert into organization_domains (organization_id, domain, verification_challenge)
       select $1, 'd' || i || '.big.example', 'challenge' from generate_series(1, 2345) i`,
      [big.organizationId],
    );
    const path = `/api/organizations/${big.organizationId}/domains/`;
    const first = await f.api('GET', `${path}?limit=5000`, { key: big.key });
    expect(first.status).toBe(200);
    expect(first.body.count).toBe(2345);
    expect(first.body.results).toHaveLength(1000);
    expect(first.body.next).toBe(`${f.url}${path}?limit=1000&offset=1000`);
    const seen = new Set(ids(first.body));
    let next: string | null = first.body.next;
    while (next) {
      const page = (await f.api('GET', next, { key: big.key })).body;
      for (const id of ids(page)) seen.add(id);
      next = page.next;
    }
    expect(seen.size).toBe(2345);
  });

  it('pagination - lists with equal timestamps keep a stable order (id tiebreaker)', async () => {
    const first = ids((await f.api('GET', lists.invites!, { key: owner.key })).body);
    const second = ids((await f.api('GET', lists.invites!, { key: owner.key })).body);
    expect(second).toEqual(first);
    expect(new Set(first).size).toBe(N);
    expect([...first].sort().reverse()).toEqual(first);
  });
});

// End to end with a real ingest node on the admin server's NATS: projects made through the
// API are accepted within a second, deleted (or rotated-away) keys are refused within a second.
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadIngestConfig, startIngest, type IngestNode } from '../ingest/index.js';
import { startAdminFixture, type AdminFixture, type TestUser } from '../test/admin/harness.js';

let f: AdminFixture;
let ingest: IngestNode;
let owner: TestUser;

beforeAll(async () => {
  f = await startAdminFixture();
  ingest = await startIngest(loadIngestConfig({ ...f.nats.env('ingest'), CAPTURE_PORT: '0', PARSE_THREADS: '1' }), { log: pino({ level: 'silent' }) });
  owner = await f.newUser('owner@ingest.example');
});
afterAll(async () => {
  await ingest?.stop();
  await f?.stop();
});

function capture(token: string): Promise<Response> {
  return fetch(`${ingest.url}/capture/`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ api_key: token, event: 'signed up', distinct_id: 'user-1' }),
  });
}

/** Milliseconds until capture with `token` answers `status` (polling every 10 ms, at most 2 s). */
async function msUntil(token: string, status: number): Promise<number> {
  const started = Date.now();
  while (Date.now() - started < 2_000) {
    const res = await capture(token);
    await res.arrayBuffer();
    if (res.status === status) return Date.now() - started;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`capture with ${token} never answered ${status}`);
}

describe('admin and ingest', () => {
  it('ingest - a project created through the API is accepted within a second; deleted, it is refused within a second', async () => {
    const created = await f.api('POST', `/api/organizations/${owner.organizationId}/projects/`, { key: owner.key, body: { name: 'Live' } });
    expect(created.status).toBe(201);
    const token = created.body.api_token as string;
    expect(await msUntil(token, 200)).toBeLessThan(1_000);

    expect((await f.api('DELETE', `/api/projects/${created.body.id}/`, { key: owner.key })).status).toBe(204);
    expect(await msUntil(token, 401)).toBeLessThan(1_000);
    const refused = await capture(token);
    expect(refused.status).toBe(401);
    expect(await refused.json()).toMatchObject({ code: 'unknown_api_key' });
  });

  it('ingest - a new organization\'s default project is accepted; a rotated key is refused and its successor accepted', async () => {
    const org = (await f.api('POST', '/api/organizations/', { key: owner.key, body: { name: 'Ingesting org' } })).body;
    const project = org.teams[0] as { id: number; api_token: string };
    expect(await msUntil(project.api_token, 200)).toBeLessThan(1_000);
    const rotated = (await f.api('PATCH', `/api/projects/${project.id}/reset_token/`, { key: owner.key })).body;
    expect(await msUntil(project.api_token, 401)).toBeLessThan(1_000);
    expect(await msUntil(rotated.api_token as string, 200)).toBeLessThan(1_000);
    expect((await f.api('DELETE', `/api/organizations/${org.id}/`, { key: owner.key })).status).toBe(204);
    expect(await msUntil(rotated.api_token as string, 401)).toBeLessThan(1_000);
  });
});

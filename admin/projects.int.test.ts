import { Kvm, KvWatchInclude } from '@nats-io/kv';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger, PROJECTS_BUCKET, type ProjectLimits, type ProjectRecord } from '../lib/index.js';
import { DEFAULT_LIMITS, startAdminFixture, type AdminFixture, type TestUser } from '../test/admin/harness.js';
import { TEST_SECRET_KEY, waitFor } from '../test/kit/index.js';
import { loadAdminConfig, startAdmin } from './index.js';
import { paginatedProjects, projectSchema } from './schemas.js';

let f: AdminFixture;
let owner: TestUser;

beforeAll(async () => {
  f = await startAdminFixture();
  owner = await f.newUser('owner@projects.example');
});
afterAll(async () => f?.stop());

async function kvValue(token: string): Promise<unknown> {
  const entry = await (await f.kv()).get(token);
  return entry && entry.operation === 'PUT' ? entry.json() : undefined;
}

/** Waits (at most a second) until the bucket holds `expected` under `token` (undefined: nothing). */
async function expectKvWithinASecond(token: string, expected: unknown): Promise<void> {
  const started = Date.now();
  await waitFor(`KV ${token}`, async () => JSON.stringify(await kvValue(token)) === JSON.stringify(expected), 1_000, 10);
  expect(Date.now() - started).toBeLessThan(1_000);
}

describe('projects', () => {
  it('projects - list and retrieve projects of the key\'s organizations', async () => {
    const res = await f.api('GET', '/api/projects/', { key: owner.key });
    expect(res.status).toBe(200);
    const page = paginatedProjects.parse(res.body);
    expect(page.results).toEqual([
      expect.objectContaining({ id: owner.projectId, organization: owner.organizationId, name: 'Default project', api_token: owner.projectApiKey }),
    ]);
    const one = await f.api('GET', `/api/projects/${owner.projectId}/`, { key: owner.key });
    expect(projectSchema.parse(one.body)).toEqual(page.results[0]);
    for (const id of ['999999', 'abc', '0', '99999999999']) expect((await f.api('GET', `/api/projects/${id}/`, { key: owner.key })).status, id).toBe(404);
  });

  it('projects - a created project is in the KV bucket before the answer; a deleted one is gone', async () => {
    const created = await f.api('POST', `/api/organizations/${owner.organizationId}/projects/`, { key: owner.key, body: { name: 'Web app' } });
    expect(created.status).toBe(201);
    const project = projectSchema.parse(created.body);
    expect(project.api_token).toMatch(/^phc_/);
    expect(await kvValue(project.api_token)).toEqual({ projectId: project.id, organizationId: owner.organizationId, limits: DEFAULT_LIMITS });

    const deleted = await f.api('DELETE', `/api/projects/${project.id}/`, { key: owner.key });
    expect(deleted.status).toBe(204);
    expect(deleted.text).toBe('');
    expect(await kvValue(project.api_token)).toBeUndefined();
    expect((await f.api('GET', `/api/projects/${project.id}/`, { key: owner.key })).status).toBe(404);
  });

  it('projects - an ingest-side watcher sees the project arrive and leave within a second', async () => {
    const kv = await new Kvm(f.nc).open(PROJECTS_BUCKET);
    const seen: Array<{ key: string; op: string; at: number }> = [];
    const watch = await kv.watch({ include: KvWatchInclude.UpdatesOnly });
    void (async () => {
      for await (const e of watch) seen.push({ key: e.key, op: e.operation, at: Date.now() });
    })();
    const t0 = Date.now();
    const project = (await f.api('POST', `/api/organizations/${owner.organizationId}/projects/`, { key: owner.key, body: { name: 'Watched' } })).body;
    await waitFor('PUT seen', () => seen.some((e) => e.key === project.api_token && e.op === 'PUT'), 1_000, 10);
    const t1 = Date.now();
    await f.api('DELETE', `/api/projects/${project.id}/`, { key: owner.key });
    await waitFor('DEL seen', () => seen.some((e) => e.key === project.api_token && e.op !== 'PUT'), 1_000, 10);
    watch.stop();
    expect(seen.find((e) => e.op === 'PUT')!.at - t0).toBeLessThan(1_000);
    expect(seen.find((e) => e.op !== 'PUT')!.at - t1).toBeLessThan(1_000);
  });

  it('projects - rename and reset_token; the old token leaves the bucket, the new one enters', async () => {
    const project = (await f.api('POST', `/api/organizations/${owner.organizationId}/projects/`, { key: owner.key, body: { name: 'Rotate' } })).body;
    const renamed = await f.api('PATCH', `/api/projects/${project.id}/`, { key: owner.key, body: { name: 'Rotated ✓', api_token: 'phc_mine' } });
    expect(renamed.status).toBe(200);
    expect(renamed.body).toMatchObject({ name: 'Rotated ✓', api_token: project.api_token });
    const reset = await f.api('PATCH', `/api/projects/${project.id}/reset_token/`, { key: owner.key });
    expect(reset.status).toBe(200);
    expect(reset.body.api_token).not.toBe(project.api_token);
    expect(reset.body.api_token).toMatch(/^phc_/);
    expect(await kvValue(project.api_token)).toBeUndefined();
    expect(await kvValue(reset.body.api_token)).toEqual({ projectId: project.id, organizationId: owner.organizationId, limits: DEFAULT_LIMITS });
  });

  it('projects - deleting an organization removes its projects from the bucket', async () => {
    const org = (await f.api('POST', '/api/organizations/', { key: owner.key, body: { name: 'Temporary' } })).body;
    const token = org.teams[0].api_token as string;
    expect(await kvValue(token)).toEqual({ projectId: org.teams[0].id, organizationId: org.id, limits: DEFAULT_LIMITS });
    expect((await f.api('DELETE', `/api/organizations/${org.id}/`, { key: owner.key })).status).toBe(204);
    expect(await kvValue(token)).toBeUndefined();
  });

  it('projects - changes made outside this server (another replica, the CLI) reach the bucket through LISTEN', async () => {
    const { rows } = await f.db.query<{ id: number; api_token: string }>(
      "insert into projects (organization_id, name, api_token) values ($1, 'From SQL', 'phc_fromsql1') returning id, api_token",
      [owner.organizationId],
    );
    await expectKvWithinASecond('phc_fromsql1', { projectId: rows[0]!.id, organizationId: owner.organizationId, limits: DEFAULT_LIMITS });
    await f.db.query("update projects set api_token = 'phc_fromsql2' where id = $1", [rows[0]!.id]);
    await expectKvWithinASecond('phc_fromsql1', undefined);
    await expectKvWithinASecond('phc_fromsql2', { projectId: rows[0]!.id, organizationId: owner.organizationId, limits: DEFAULT_LIMITS });
    await f.db.query('delete from projects where id = $1', [rows[0]!.id]);
    await expectKvWithinASecond('phc_fromsql2', undefined);
  });

  it('projects - with NATS down, changes still answer at once and reach the bucket once NATS is back', async () => {
    await using iso = await startAdminFixture();
    const u = await iso.newUser('outage@projects.example');
    await iso.nats.kill();
    const started = Date.now();
    const created = await iso.api('POST', `/api/organizations/${u.organizationId}/projects/`, { key: u.key, body: { name: 'During outage' } });
    expect(created.status).toBe(201);
    expect(Date.now() - started).toBeLessThan(4_000);
    const deleted = await iso.api('DELETE', `/api/projects/${u.projectId}/`, { key: u.key });
    expect(deleted.status).toBe(204);
    await iso.nats.restart();
    const kv = await iso.kv();
    await waitFor('bucket caught up after the outage', async () => {
      const added = await kv.get(created.body.api_token);
      const removed = await kv.get(u.projectApiKey);
      return added?.operation === 'PUT' && (!removed || removed.operation !== 'PUT');
    }, 20_000, 100);
  }, 60_000);

  it('projects - at start the bucket is fully reconciled: stale keys removed, missing keys restored', async () => {
    const kv = await f.kv();
    await kv.put('phc_stale', JSON.stringify({ projectId: 424242, organizationId: owner.organizationId }));
    await kv.put(owner.projectApiKey, JSON.stringify({ projectId: 1, organizationId: 'wrong' }));
    const extra = (await f.api('POST', `/api/organizations/${owner.organizationId}/projects/`, { key: owner.key, body: { name: 'Missing' } })).body;
    await kv.delete(extra.api_token);
    const second = await startAdmin(f.config, { logger: createLogger('admin-test', 'silent') });
    try {
      expect(await kvValue('phc_stale')).toBeUndefined();
      expect(await kvValue(owner.projectApiKey)).toEqual({ projectId: owner.projectId, organizationId: owner.organizationId, limits: DEFAULT_LIMITS });
      expect(await kvValue(extra.api_token)).toEqual({ projectId: extra.id, organizationId: owner.organizationId, limits: DEFAULT_LIMITS });
      const keys: string[] = [];
      for await (const k of await kv.keys()) keys.push(k);
      const { rows } = await f.db.query<{ api_token: string }>('select api_token from projects');
      expect(keys.sort()).toEqual(rows.map((r) => r.api_token).sort());
    } finally {
      await second.stop();
    }
  });

  it('projects - capture limits: set per project through the API, capped by the cluster settings, in the KV record within a second', async () => {
    await using limited = await startAdminFixture({ PROJECT_EVENTS_PER_SECOND: '1000', PROJECT_EVENTS_PER_DAY: '0', PROJECT_HISTORICAL_MESSAGES_PER_SECOND: '50' });
    const u = await limited.newUser('limits@projects.example');
    const record = async (token: string): Promise<unknown> => (await (await limited.kv()).get(token))?.json<ProjectRecord>().limits;
    const path = `/api/projects/${u.projectId}/`;
    const fresh = (await limited.api('GET', path, { key: u.key })).body;
    expect(fresh).toMatchObject({ capture_events_per_second: null, capture_events_per_day: null, historical_messages_per_second: null });
    // Unset: the cluster's defaults apply; PROJECT_EVENTS_PER_DAY=0 means no quota.
    expect(await record(u.projectApiKey)).toEqual({ eventsPerSecond: 1000, historicalMessagesPerSecond: 50 });

    const set = await limited.api('PATCH', path, { key: u.key, body: { capture_events_per_second: 10, capture_events_per_day: 1_000_000_000 } });
    expect(set.status).toBe(200);
    expect(set.body).toMatchObject({ capture_events_per_second: 10, capture_events_per_day: 1_000_000_000, historical_messages_per_second: null });
    expect(await record(u.projectApiKey)).toEqual({ eventsPerSecond: 10, eventsPerDay: 1_000_000_000, historicalMessagesPerSecond: 50 });

    // Above the cluster's ceiling, not a positive integer: 400 on the field, nothing changes.
    const above = await limited.api('PATCH', path, { key: u.key, body: { capture_events_per_second: 1001 } });
    expect(above.status).toBe(400);
    expect(above.body).toEqual({ type: 'validation_error', code: 'validation_error', detail: 'Ensure this value is less than or equal to 1000.', attr: 'capture_events_per_second' });
    for (const bad of [0, -1, 1.5, '10', 2 ** 31]) {
      const res = await limited.api('PATCH', path, { key: u.key, body: { historical_messages_per_second: bad } });
      expect(res.status, String(bad)).toBe(400);
      expect(res.body.attr, String(bad)).toBe('historical_messages_per_second');
    }
    expect((await limited.api('GET', path, { key: u.key })).body.capture_events_per_second).toBe(10);

    // null returns a limit to the cluster default.
    await limited.api('PATCH', path, { key: u.key, body: { capture_events_per_second: null, capture_events_per_day: null } });
    expect(await record(u.projectApiKey)).toEqual({ eventsPerSecond: 1000, historicalMessagesPerSecond: 50 });

    // Created with limits; a member cannot change them.
    const created = await limited.api('POST', `/api/organizations/${u.organizationId}/projects/`, { key: u.key, body: { name: 'Quota', capture_events_per_day: 5 } });
    expect(created.status).toBe(201);
    expect(await record(created.body.api_token)).toEqual({ eventsPerSecond: 1000, eventsPerDay: 5, historicalMessagesPerSecond: 50 });
    const member = await limited.addMember(u.organizationId, 'member@limits.example', 1);
    expect((await limited.api('PATCH', path, { key: member.key, body: { capture_events_per_second: 1 } })).status).toBe(403);

    // A change made outside this server (SQL, another replica) reaches the record too.
    await limited.db.query('update projects set historical_messages_per_second = 7 where id = $1', [u.projectId]);
    await waitFor('limit from SQL', async () => JSON.stringify(await record(u.projectApiKey)) === JSON.stringify({ eventsPerSecond: 1000, historicalMessagesPerSecond: 7 }), 1_000, 10);

    // The cluster's settings change with a restart of the admin server: its reconcile rewrites every
    // record (a project's own lower value stays; a value above the new ceiling is capped).
    await limited.db.query('update projects set capture_events_per_second = 800 where id = $1', [created.body.id]);
    await waitFor('set from SQL', async () => ((await record(created.body.api_token)) as ProjectLimits).eventsPerSecond === 800, 1_000, 10);
    await limited.admin.stop();
    const restarted = await startAdmin(loadAdminConfig({ DATABASE_URL: limited.databaseUrl, ...limited.nats.env('admin'), SPATE_SECRET_KEY: TEST_SECRET_KEY, ADMIN_PORT: '0', PROJECT_EVENTS_PER_SECOND: '500', PROJECT_HISTORICAL_MESSAGES_PER_SECOND: '0' }), {
      logger: createLogger('admin-test', 'silent'),
    });
    try {
      expect(await record(u.projectApiKey)).toEqual({ eventsPerSecond: 500, historicalMessagesPerSecond: 7 });
      expect(await record(created.body.api_token)).toEqual({ eventsPerSecond: 500, eventsPerDay: 5 });
    } finally {
      await restarted.stop();
    }
  });

  it('projects - members read; only admins and owners create, rename, rotate or delete', async () => {
    const member = await f.addMember(owner.organizationId, 'member@projects.example', 1);
    expect((await f.api('GET', `/api/projects/${owner.projectId}/`, { key: member.key })).status).toBe(200);
    expect((await f.api('GET', `/api/organizations/${owner.organizationId}/projects/`, { key: member.key })).status).toBe(200);
    const attempts = [
      () => f.api('POST', `/api/organizations/${owner.organizationId}/projects/`, { key: member.key, body: { name: 'x' } }),
      () => f.api('PATCH', `/api/projects/${owner.projectId}/`, { key: member.key, body: { name: 'x' } }),
      () => f.api('PATCH', `/api/projects/${owner.projectId}/reset_token/`, { key: member.key }),
      () => f.api('DELETE', `/api/projects/${owner.projectId}/`, { key: member.key }),
    ];
    for (const attempt of attempts) {
      const res = await attempt();
      expect(res.status).toBe(403);
      expect(res.body.detail).toBe('Your organization access level is insufficient.');
    }
    await f.db.query('delete from organization_memberships where user_id = $1', [member.id]);
  });

  it('projects - names with SQL metacharacters and Unicode come back verbatim', async () => {
    const name = "Ünïcödé 🚀 '; DELETE FROM projects; -- \\ %_ \"x\"";
    const created = await f.api('POST', `/api/organizations/${owner.organizationId}/projects/`, { key: owner.key, body: { name } });
    expect(created.body.name).toBe(name);
    expect((await f.api('GET', `/api/projects/${created.body.id}/`, { key: owner.key })).body.name).toBe(name);
    expect((await f.db.query('select count(*)::int as n from projects')).rows[0].n).toBeGreaterThan(1);
  });

  it('projects - invalid bodies and wrong methods', async () => {
    const create = await f.api('POST', `/api/organizations/${owner.organizationId}/projects/`, { key: owner.key, body: { name: '' } });
    expect(create.body).toEqual({ type: 'validation_error', code: 'validation_error', detail: 'This field may not be blank.', attr: 'name' });
    const patch = await f.api('PATCH', `/api/projects/${owner.projectId}/`, { key: owner.key, body: { name: 'x'.repeat(201) } });
    expect(patch.body).toMatchObject({ code: 'validation_error', attr: 'name' });
    expect((await f.api('POST', '/api/projects/', { key: owner.key, body: { name: 'x' } })).status).toBe(405);
    expect((await f.api('POST', `/api/projects/${owner.projectId}/reset_token/`, { key: owner.key })).status).toBe(405);
  });
});

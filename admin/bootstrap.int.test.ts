import { mkdtempSync, rmSync, statSync, unlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Kvm } from '@nats-io/kv';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger, PROJECTS_BUCKET, type NatsConnection } from '../lib/index.js';
import { DEFAULT_LIMITS } from '../test/admin/harness.js';
import { freshDatabase, startNats, TEST_SECRET_KEY, type NatsHandle } from '../test/kit/index.js';
import { BOOTSTRAP_FILE, bootstrapCluster, loadAdminConfig, startAdmin } from './index.js';

const logger = createLogger('bootstrap-test', 'silent');
let nats: NatsHandle;
let nc: NatsConnection;
const dirs: string[] = [];

beforeAll(async () => {
  nats = await startNats();
  nc = await nats.connect('bootstrap-test');
});
afterAll(async () => {
  await nc?.close();
  await nats?.stop();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'spate-bootstrap-'));
  dirs.push(d);
  return d;
}

describe('bootstrap', () => {
  it('bootstrap - a fresh database gets a user, an organization, project 1 and a * key that works', async () => {
    const databaseUrl = await freshDatabase();
    const dataDir = tempDir();
    const result = await bootstrapCluster({ databaseUrl, dataDir, natsUrl: nats.url, natsAuth: nats.credentials('admin'), logger });
    expect(result).toMatchObject({ projectId: 1, userEmail: 'admin@spate.local' });
    expect(result.organizationId).toMatch(/^[0-9a-f-]{36}$/);
    expect(result.projectApiKey).toMatch(/^phc_/);
    expect(result.personalApiKey).toMatch(/^phx_/);
    expect(statSync(join(dataDir, BOOTSTRAP_FILE)).mode & 0o777).toBe(0o600);

    const kv = await new Kvm(nc).open(PROJECTS_BUCKET);
    expect((await kv.get(result.projectApiKey))?.json()).toEqual({ projectId: 1, organizationId: result.organizationId, limits: DEFAULT_LIMITS });

    const admin = await startAdmin(loadAdminConfig({ DATABASE_URL: databaseUrl, ...nats.env('admin'), SPATE_SECRET_KEY: TEST_SECRET_KEY, ADMIN_PORT: '0' }), { logger });
    try {
      const headers = { authorization: `Bearer ${result.personalApiKey}` };
      const org = await (await fetch(`${admin.url}/api/organizations/${result.organizationId}/`, { headers })).json();
      expect(org).toMatchObject({ id: result.organizationId, membership_level: 15, plugins_access_level: 9 });
      const project = await (await fetch(`${admin.url}/api/projects/1/`, { headers })).json();
      expect(project).toMatchObject({ id: 1, api_token: result.projectApiKey, organization: result.organizationId });
    } finally {
      await admin.stop();
    }
  });

  it('bootstrap - later runs return the same organization, project and key', async () => {
    const databaseUrl = await freshDatabase();
    const dataDir = tempDir();
    const first = await bootstrapCluster({ databaseUrl, dataDir, logger, email: 'ops@example.com' });
    const second = await bootstrapCluster({ databaseUrl, dataDir, logger });
    expect(second).toEqual(first);
    expect(first.userEmail).toBe('ops@example.com');
  });

  it('bootstrap - a lost key file gets a new * key; the organization and project stay', async () => {
    const databaseUrl = await freshDatabase();
    const dataDir = tempDir();
    const first = await bootstrapCluster({ databaseUrl, dataDir, logger });
    unlinkSync(join(dataDir, BOOTSTRAP_FILE));
    const second = await bootstrapCluster({ databaseUrl, dataDir, logger });
    expect(second.personalApiKey).not.toBe(first.personalApiKey);
    expect({ ...second, personalApiKey: '' }).toEqual({ ...first, personalApiKey: '' });
    const third = await bootstrapCluster({ databaseUrl, dataDir: tempDir(), logger });
    expect(third.personalApiKey).not.toBe(second.personalApiKey);
    expect(third.projectId).toBe(first.projectId);
  });

  it('bootstrap - concurrent first runs agree on one organization and one key', async () => {
    const databaseUrl = await freshDatabase();
    const dataDir = tempDir();
    const results = await Promise.all(Array.from({ length: 4 }, () => bootstrapCluster({ databaseUrl, dataDir, logger })));
    for (const r of results) expect(r).toEqual(results[0]);
    const client = new pg.Client({ connectionString: databaseUrl });
    await client.connect();
    const { rows } = await client.query('select (select count(*)::int from organizations) as orgs, (select count(*)::int from personal_api_keys) as keys');
    await client.end();
    expect(rows[0]).toEqual({ orgs: 1, keys: 1 });
  });

  it('bootstrap - a deleted bootstrap organization is made again', async () => {
    const databaseUrl = await freshDatabase();
    const dataDir = tempDir();
    const first = await bootstrapCluster({ databaseUrl, dataDir, logger });
    const client = new pg.Client({ connectionString: databaseUrl });
    await client.connect();
    await client.query('delete from organizations where id = $1', [first.organizationId]);
    await client.end();
    const second = await bootstrapCluster({ databaseUrl, dataDir, logger });
    expect(second.organizationId).not.toBe(first.organizationId);
    expect(second.projectId).not.toBe(first.projectId);
    expect(second.personalApiKey).toBe(first.personalApiKey);
  });
});

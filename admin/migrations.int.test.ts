import { readdirSync } from 'node:fs';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { createLogger } from '../lib/index.js';
import { freshDatabase, startNats, TEST_SECRET_KEY } from '../test/kit/index.js';
import { loadAdminConfig, migrate, MIGRATIONS_TABLE, startAdmin } from './index.js';

/** Every migration, in order (file names without extension). */
const ALL = readdirSync(new URL('./db/migrations/', import.meta.url))
  .filter((n) => /^\d+_[\w-]+\.ts$/.test(n))
  .map((n) => n.replace(/\.ts$/, ''))
  .sort();

const WORKER_TABLES = ['persons', 'person_distinct_ids', 'groups', 'group_type_mappings', 'ingestion_warnings', 'event_dedup', 'shard_positions'];

async function tables(url: string): Promise<string[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ table_name: string }>("select table_name from information_schema.tables where table_schema = 'public' order by 1");
    return rows.map((r) => r.table_name);
  } finally {
    await client.end();
  }
}

describe('migrations', () => {
  it('migrations - two admin servers starting at once on a fresh database both come up, migrations applied once', async () => {
    const databaseUrl = await freshDatabase();
    await using nats = await startNats();
    const config = loadAdminConfig({ DATABASE_URL: databaseUrl, ...nats.env('admin'), SPATE_SECRET_KEY: TEST_SECRET_KEY, ADMIN_PORT: '0', LOG_LEVEL: 'silent' });
    const logger = createLogger('admin-test', 'silent');
    const [a, b] = await Promise.all([startAdmin(config, { logger }), startAdmin(config, { logger })]);
    try {
      for (const server of [a, b]) expect((await fetch(`${server.url}/_health`)).status).toBe(200);
      const client = new pg.Client({ connectionString: databaseUrl });
      await client.connect();
      const { rows } = await client.query<{ name: string }>(`select name from ${MIGRATIONS_TABLE}`);
      await client.end();
      expect(rows.map((r) => r.name)).toEqual(ALL);
    } finally {
      await Promise.all([a.stop(), b.stop()]);
    }
    expect(await migrate(databaseUrl)).toEqual([]);
  });

  it('migrations - many concurrent runs wait for each other instead of failing', async () => {
    const databaseUrl = await freshDatabase();
    const results = await Promise.all(Array.from({ length: 5 }, () => migrate(databaseUrl)));
    expect(results.filter((r) => r.length === ALL.length)).toHaveLength(1);
    expect(results.filter((r) => r.length === 0)).toHaveLength(4);
  });

  it("migrations - own bookkeeping table, none of the workers' table names", async () => {
    const databaseUrl = await freshDatabase();
    await migrate(databaseUrl);
    const names = await tables(databaseUrl);
    expect(names).toContain(MIGRATIONS_TABLE);
    expect(names).not.toContain('pgmigrations');
    for (const t of WORKER_TABLES) expect(names).not.toContain(t);
  });

  it('migrations - the pipelines migration applies on top of an existing first version, keeping its data', async () => {
    expect(ALL.slice(0, 2)).toEqual(['1764000000000_admin-initial', '1765000000000_admin-pipelines']);
    const databaseUrl = await freshDatabase();
    expect(await migrate(databaseUrl, undefined, { count: 1 })).toEqual([ALL[0]]);
    const client = new pg.Client({ connectionString: databaseUrl });
    await client.connect();
    try {
      const org = (await client.query("insert into organizations (name, slug) values ('Old', 'old') returning id")).rows[0].id;
      const project = (await client.query("insert into projects (organization_id, name, api_token) values ($1, 'P', 'phc_old') returning id", [org])).rows[0].id;
      expect(await migrate(databaseUrl, undefined, { count: 1 })).toEqual([ALL[1]]);
      expect((await client.query('select name from projects where id = $1', [project])).rows).toEqual([{ name: 'P' }]);
      const exp = await client.query(
        `insert into batch_exports (team_id, name, destination_type, "interval") values ($1, 'e', 'NoOp', 'hour') returning model, paused, deleted`,
        [project],
      );
      expect(exp.rows).toEqual([{ model: 'events', paused: false, deleted: false }]);
    } finally {
      await client.end();
    }
  });

  it('migrations - existing organizations keep their plugins_access_level; new ones start at 3', async () => {
    const databaseUrl = await freshDatabase();
    const before = ALL.indexOf('1766200000000_admin-plugins-access-default');
    expect(before).toBeGreaterThan(0);
    await migrate(databaseUrl, undefined, { count: before });
    const client = new pg.Client({ connectionString: databaseUrl });
    await client.connect();
    try {
      await client.query("insert into organizations (name, slug) values ('Old', 'old')");
      await migrate(databaseUrl);
      await client.query("insert into organizations (name, slug) values ('New', 'new')");
      const { rows } = await client.query('select slug, plugins_access_level from organizations order by slug');
      expect(rows).toEqual([
        { slug: 'new', plugins_access_level: 3 },
        { slug: 'old', plugins_access_level: 9 },
      ]);
    } finally {
      await client.end();
    }
  });

  it("migrations - coexist with another node-pg-migrate history (the workers') in the same database", async () => {
    const databaseUrl = await freshDatabase();
    const client = new pg.Client({ connectionString: databaseUrl });
    await client.connect();
    await client.query('create table pgmigrations (id serial primary key, name varchar(255) not null, run_on timestamp not null)');
    await client.query("insert into pgmigrations (name, run_on) values ('1700000000000_workers', now())");
    await client.query('create table persons (id bigserial primary key)');
    await client.end();
    expect(await migrate(databaseUrl)).toEqual(ALL);
    expect(await tables(databaseUrl)).toEqual(expect.arrayContaining(['pgmigrations', 'persons', 'organizations']));
  });
});

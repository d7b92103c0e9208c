import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decryptConfigSecrets, isEncryptedSecret, secretContext } from '../lib/index.js';
import { testSecretKeyring } from '../test/kit/index.js';
import { newBatchExport } from '../test/admin/endpoints.js';
import { startAdminFixture, type AdminFixture, type TestUser } from '../test/admin/harness.js';
import { batchExportSchema, paginatedBatchExports } from './pipeline-schemas.js';

let f: AdminFixture;
let owner: TestUser;
let base: string;

beforeAll(async () => {
  f = await startAdminFixture();
  owner = await f.newUser('owner@exports.example');
  base = `/api/organizations/${owner.organizationId}/batch_exports/`;
});
afterAll(async () => f?.stop());

const s3 = { bucket_name: 'my-bucket', region: 'eu-west-1', prefix: 'events/', aws_access_key_id: 'AKIA123', aws_secret_access_key: 'very-secret' };
const validation = (detail: string, attr: string | null) => ({ type: 'validation_error', code: 'validation_error', detail, attr });

async function create(body: Record<string, unknown>) {
  return f.api('POST', base, { key: owner.key, body: { name: 'Export', interval: 'hour', destination: { type: 'NoOp', config: {} }, ...body } });
}

async function stored(id: string) {
  return (await f.db.query('select * from batch_exports where id = $1', [id])).rows[0];
}

/** The stored destination config as a worker reads it: its secrets (stored encrypted) decrypted. */
async function storedConfig(id: string): Promise<Record<string, unknown>> {
  const row = await stored(id);
  return decryptConfigSecrets(row.destination_config, testSecretKeyring(), (field) => secretContext('batch_export', row.team_id, field));
}

describe('batch exports', () => {
  it('batch exports - create, retrieve and list; secrets are stored but never shown', async () => {
    const res = await create({ name: 'To S3', model: 'persons', interval: 'day', destination: { type: 'S3', config: s3 }, hogql_query: 'select event from events' });
    expect(res.status, res.text).toBe(201);
    const created = batchExportSchema.parse(res.body);
    expect(created).toMatchObject({
      team_id: owner.projectId,
      name: 'To S3',
      model: 'persons',
      interval: 'day',
      paused: false,
      last_paused_at: null,
      start_at: null,
      end_at: null,
      latest_runs: [],
      hogql_query: 'select event from events',
      schema: null,
      destination: { type: 'S3', config: { bucket_name: 'my-bucket', region: 'eu-west-1', prefix: 'events/' } },
    });
    expect(res.text).not.toContain('very-secret');
    expect(res.text).not.toContain('AKIA123');
    // PostgreSQL holds the secret fields encrypted, under their names; a worker decrypts them.
    const raw = (await stored(created.id)).destination_config;
    expect(JSON.stringify(raw)).not.toContain('very-secret');
    expect(JSON.stringify(raw)).not.toContain('AKIA123');
    expect(isEncryptedSecret(raw.aws_secret_access_key) && isEncryptedSecret(raw.aws_access_key_id)).toBe(true);
    expect(raw.bucket_name).toBe('my-bucket');
    expect(await storedConfig(created.id)).toEqual(s3);

    const one = await f.api('GET', `${base}${created.id}/`, { key: owner.key });
    expect(one.status).toBe(200);
    expect(one.body).toEqual(created);

    const second = (await create({ name: 'Second' })).body;
    const list = await f.api('GET', base, { key: owner.key });
    expect(list.status).toBe(200);
    const page = paginatedBatchExports.parse(list.body);
    expect(page.results.map((e) => e.id).slice(0, 2)).toEqual([second.id, created.id]);
    expect(list.text).not.toContain('very-secret');
  });

  it('batch exports - defaults: model events, the organization’s first project; team_id may name another of its projects', async () => {
    const res = await create({});
    expect(res.body).toMatchObject({ model: 'events', team_id: owner.projectId, destination: { type: 'NoOp', config: {} } });
    const project = (await f.api('POST', `/api/organizations/${owner.organizationId}/projects/`, { key: owner.key, body: { name: 'Other' } })).body;
    const other = await create({ team_id: project.id });
    expect(other.status).toBe(201);
    expect(other.body.team_id).toBe(project.id);
    const stranger = await f.newUser('stranger@exports.example');
    const refused = await create({ team_id: stranger.projectId });
    expect(refused.status).toBe(400);
    expect(refused.body).toEqual(validation('Project does not exist on this organization.', 'team_id'));
  });

  it('batch exports - every destination type with its required fields; HTTP exports events only', async () => {
    const configs: Record<string, Record<string, unknown>> = {
      S3: { bucket_name: 'b', region: 'r', prefix: 'p', file_format: 'Parquet', compression: 'zstd' },
      Postgres: { user: 'u', password: 'pw', host: 'db.example', database: 'analytics', port: '5433', has_self_signed_cert: false },
      HTTP: { url: 'https://example.com/ingest', token: 'tok', include_events: ['$pageview'] },
      NoOp: { arg: 'x' },
    };
    for (const [type, config] of Object.entries(configs)) {
      const res = await create({ destination: { type, config } });
      expect(res.status, `${type}: ${res.text}`).toBe(201);
      expect(res.text).not.toMatch(/"(pw|tok)"/);
    }
    expect((await create({ destination: { type: 'Postgres', config: configs.Postgres } })).body.destination.config).toEqual({
      host: 'db.example',
      database: 'analytics',
      port: 5433,
      has_self_signed_cert: false,
    });
    const http = await create({ model: 'persons', destination: { type: 'HTTP', config: configs.HTTP } });
    expect(http.body).toEqual(validation('HTTP batch exports only support the events model', 'model'));
  });

  it('batch exports - invalid bodies answer 400 naming the field', async () => {
    const cases: Array<[Record<string, unknown>, ReturnType<typeof validation>]> = [
      [{ name: undefined }, validation('This field is required.', 'name')],
      [{ name: '' }, validation('This field may not be blank.', 'name')],
      [{ interval: undefined }, validation('This field is required.', 'interval')],
      [{ interval: 'minute' }, validation('"minute" is not a valid choice.', 'interval')],
      [{ model: 'sessions' }, validation('"sessions" is not a valid choice.', 'model')],
      [{ destination: undefined }, validation('This field is required.', 'destination')],
      [{ destination: { type: 'Snowflake', config: {} } }, validation('"Snowflake" is not a valid choice.', 'destination__type')],
      [{ destination: { type: 'NoOp' } }, validation('This field is required.', 'destination__config')],
      [{ destination: { type: 'S3', config: { ...s3, bucket: 'x', acl: 'y' } } }, validation("Configuration has unknown field/s: 'acl', 'bucket'", 'destination__config')],
      [{ destination: { type: 'S3', config: { bucket_name: 'b', region: 'r' } } }, validation("Configuration missing required field: 'prefix'", 'destination__config')],
      [{ destination: { type: 'HTTP', config: { url: 'u', token: 7 } } }, validation("Configuration has invalid type: got 'int', expected 'str'", 'destination__config')],
      [{ destination: { type: 'S3', config: { ...s3, file_format: 'CSV' } } }, validation("File format CSV is not supported. Supported file formats are ['Parquet', 'JSONLines']", 'destination__config')],
      [{ start_at: 'soon' }, validation('Datetime has wrong format. Use one of these formats instead: YYYY-MM-DDThh:mm[:ss[.uuuuuu]][+HH:MM|-HH:MM|Z].', 'start_at')],
      [{ start_at: '2024-02-01T00:00:00Z', end_at: '2024-01-01T00:00:00Z' }, validation("'start_at' must be before 'end_at'.", 'start_at')],
      [{ start_at: '2024-01-01T00:00:00Z', end_at: '2024-01-01T00:00:00Z' }, validation("'start_at' must be before 'end_at'.", 'start_at')],
      [{ paused: 'yes' }, validation('Must be a valid boolean.', 'paused')],
      [{ hogql_query: 5 }, validation('Not a valid string.', 'hogql_query')],
      [{ team_id: 'x' }, validation('A valid integer is required.', 'team_id')],
    ];
    const before = (await f.db.query('select count(*)::int as n from batch_exports')).rows[0].n;
    for (const [body, expected] of cases) {
      const res = await create(body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body, JSON.stringify(body)).toEqual(expected);
    }
    expect((await f.db.query('select count(*)::int as n from batch_exports')).rows[0].n).toBe(before);
    const notObject = await f.api('POST', base, { key: owner.key, body: ['x'] });
    expect(notObject.body).toEqual(validation('Invalid data. Expected a dictionary, but got list.', null));
  });

  it('batch exports - start_at and end_at are stored (naive times are UTC) and shown as UTC', async () => {
    const res = await create({ start_at: '2024-03-01T10:00:00+02:00', end_at: '2024-04-01T00:00:00' });
    expect(res.body).toMatchObject({ start_at: '2024-03-01T08:00:00.000Z', end_at: '2024-04-01T00:00:00.000Z' });
  });

  it('batch exports - PATCH deep-merges the config and keeps secrets; a new type needs its full config', async () => {
    const exp = (await create({ destination: { type: 'S3', config: s3 } })).body;
    const patched = await f.api('PATCH', `${base}${exp.id}/`, {
      key: owner.key,
      body: { name: 'Renamed', interval: 'week', destination: { config: { prefix: 'new/', compression: 'gzip' } } },
    });
    expect(patched.status, patched.text).toBe(200);
    expect(patched.body).toMatchObject({ name: 'Renamed', interval: 'week', destination: { type: 'S3', config: { bucket_name: 'my-bucket', prefix: 'new/', compression: 'gzip' } } });
    expect(await storedConfig(exp.id)).toEqual({ ...s3, prefix: 'new/', compression: 'gzip' });
    expect(new Date(patched.body.last_updated_at).getTime()).toBeGreaterThan(new Date(exp.last_updated_at).getTime());

    const rotated = await f.api('PATCH', `${base}${exp.id}/`, { key: owner.key, body: { destination: { type: 'S3', config: { aws_secret_access_key: 'rotated' } } } });
    expect(rotated.status).toBe(200);
    expect((await storedConfig(exp.id)).aws_secret_access_key).toBe('rotated');

    const incomplete = await f.api('PATCH', `${base}${exp.id}/`, { key: owner.key, body: { destination: { type: 'HTTP', config: { url: 'https://x' } } } });
    expect(incomplete.body).toEqual(validation("Configuration missing required field: 'token'", 'destination__config'));
    const unknown = await f.api('PATCH', `${base}${exp.id}/`, { key: owner.key, body: { destination: { config: { nope: 1 } } } });
    expect(unknown.body).toEqual(validation("Configuration has unknown field/s: 'nope'", 'destination__config'));
    const http = await f.api('PATCH', `${base}${exp.id}/`, { key: owner.key, body: { model: 'events', destination: { type: 'HTTP', config: { url: 'https://x', token: 't' } } } });
    expect(http.status).toBe(200);
    expect(await storedConfig(exp.id)).toEqual({ url: 'https://x', token: 't' });
    expect(isEncryptedSecret((await stored(exp.id)).destination_config.token)).toBe(true);
    const persons = await f.api('PATCH', `${base}${exp.id}/`, { key: owner.key, body: { model: 'persons' } });
    expect(persons.body).toEqual(validation('HTTP batch exports only support the events model', 'model'));
  });

  it('batch exports - PATCH checks start_at < end_at against the stored values; team_id cannot move', async () => {
    const exp = (await create({ start_at: '2024-01-01T00:00:00Z', end_at: '2024-02-01T00:00:00Z' })).body;
    const bad = await f.api('PATCH', `${base}${exp.id}/`, { key: owner.key, body: { start_at: '2024-03-01T00:00:00Z' } });
    expect(bad.body).toEqual(validation("'start_at' must be before 'end_at'.", 'start_at'));
    const cleared = await f.api('PATCH', `${base}${exp.id}/`, { key: owner.key, body: { start_at: '2024-03-01T00:00:00Z', end_at: null } });
    expect(cleared.body).toMatchObject({ start_at: '2024-03-01T00:00:00.000Z', end_at: null });
    const moved = await f.api('PATCH', `${base}${exp.id}/`, { key: owner.key, body: { team_id: 999 } });
    expect(moved.body.team_id).toBe(owner.projectId);
  });

  it('batch exports - pause and unpause answer 200 with an empty body, are idempotent and keep last_paused_at', async () => {
    const exp = (await create({})).body;
    const path = `${base}${exp.id}/`;
    const paused = await f.api('POST', `${path}pause/`, { key: owner.key });
    expect(paused.status).toBe(200);
    expect(paused.text).toBe('');
    const first = (await f.api('GET', path, { key: owner.key })).body;
    expect(first.paused).toBe(true);
    expect(first.last_paused_at).not.toBeNull();
    expect(Math.abs(new Date(first.last_paused_at).getTime() - Date.now())).toBeLessThan(60_000);

    const again = await f.api('POST', `${path}pause/`, { key: owner.key });
    expect(again.status).toBe(200);
    expect(again.text).toBe('');
    const second = (await f.api('GET', path, { key: owner.key })).body;
    expect(second).toMatchObject({ paused: true, last_paused_at: first.last_paused_at, last_updated_at: first.last_updated_at });

    for (let i = 0; i < 2; i++) {
      const unpaused = await f.api('POST', `${path}unpause/`, { key: owner.key, body: { backfill: false } });
      expect(unpaused.status).toBe(200);
      expect(unpaused.text).toBe('');
      expect((await f.api('GET', path, { key: owner.key })).body).toMatchObject({ paused: false, last_paused_at: first.last_paused_at });
    }
    await new Promise((r) => setTimeout(r, 5));
    await f.api('POST', `${path}pause/`, { key: owner.key });
    const third = (await f.api('GET', path, { key: owner.key })).body;
    expect(new Date(third.last_paused_at).getTime()).toBeGreaterThan(new Date(first.last_paused_at).getTime());
    const activities = (await f.db.query("select activity from activity_log where scope = 'BatchExport' and item_id = $1 order by created_at", [exp.id])).rows;
    expect(activities.map((a) => a.activity)).toEqual(['created', 'paused', 'unpaused', 'paused']);
  });

  it('batch exports - PATCH paused: true also records last_paused_at; create may start paused', async () => {
    const exp = (await create({})).body;
    const res = await f.api('PATCH', `${base}${exp.id}/`, { key: owner.key, body: { paused: true } });
    expect(res.body.paused).toBe(true);
    expect(res.body.last_paused_at).not.toBeNull();
    const pausedAtCreate = (await create({ paused: true })).body;
    expect(pausedAtCreate).toMatchObject({ paused: true });
    expect(pausedAtCreate.last_paused_at).not.toBeNull();
  });

  it('batch exports - DELETE is soft: 204, then gone from retrieve and lists; unfinished runs are cancelled', async () => {
    const exp = (await create({})).body;
    await f.api('POST', `${base}${exp.id}/backfill/`, { key: owner.key, body: { start_at: '2024-01-01T00:00:00Z', end_at: '2024-01-01T02:00:00Z' } });
    const res = await f.api('DELETE', `${base}${exp.id}/`, { key: owner.key });
    expect(res.status).toBe(204);
    expect(res.text).toBe('');
    expect((await f.api('GET', `${base}${exp.id}/`, { key: owner.key })).status).toBe(404);
    for (const action of ['pause/', 'unpause/', 'backfill/']) expect((await f.api('POST', `${base}${exp.id}/${action}`, { key: owner.key })).status).toBe(404);
    expect((await f.api('DELETE', `${base}${exp.id}/`, { key: owner.key })).status).toBe(404);
    const list = await f.api('GET', `${base}?limit=1000`, { key: owner.key });
    expect(list.body.results.map((e: { id: string }) => e.id)).not.toContain(exp.id);
    expect((await stored(exp.id)).deleted).toBe(true);
    const statuses = (await f.db.query('select distinct status from batch_export_runs where batch_export_id = $1', [exp.id])).rows;
    expect(statuses).toEqual([{ status: 'Cancelled' }]);
  });

  it('batch exports - logs answer 200 with an empty body', async () => {
    const exp = (await create({})).body;
    const res = await f.api('GET', `${base}${exp.id}/logs/`, { key: owner.key });
    expect(res.status).toBe(200);
    expect(res.text).toBe('');
  });

  it('batch exports - unknown, malformed and foreign ids are 404; another organization’s exports are invisible', async () => {
    const stranger = await f.newUser('other@exports.example');
    const theirs = await newBatchExport(f, stranger);
    const notFound = { type: 'invalid_request', code: 'not_found', detail: 'Not found.', attr: null };
    for (const id of ['00000000-0000-0000-0000-000000000000', 'nope', theirs.id]) {
      for (const [method, suffix] of [['GET', ''], ['PATCH', ''], ['DELETE', ''], ['POST', 'pause/'], ['POST', 'unpause/'], ['POST', 'backfill/'], ['GET', 'logs/']] as const) {
        const res = await f.api(method, `${base}${id}/${suffix}`, { key: owner.key, body: method === 'GET' || method === 'DELETE' ? undefined : {} });
        expect(res.status, `${method} ${id} ${suffix}`).toBe(404);
        expect(res.body).toEqual(notFound);
      }
    }
    expect((await f.api('GET', `/api/organizations/${stranger.organizationId}/batch_exports/`, { key: owner.key })).status).toBe(404);
    expect((await f.api('PUT', `${base}${theirs.id}/`, { key: owner.key })).status).toBe(405);
  });

  it('batch exports - members may manage exports; a key scoped to another organization may not', async () => {
    const member = await f.addMember(owner.organizationId, 'member@exports.example', 1);
    const created = await f.api('POST', base, { key: member.key, body: { name: 'By member', interval: 'hour', destination: { type: 'NoOp', config: {} } } });
    expect(created.status).toBe(201);
    const elsewhere = (await f.api('POST', '/api/organizations/', { key: owner.key, body: { name: 'Elsewhere' } })).body;
    const scoped = await f.newKey(owner.id, ['batch_export:write'], [elsewhere.id]);
    expect((await f.api('GET', `${base}${created.body.id}/`, { key: scoped })).status).toBe(404);
  });
});

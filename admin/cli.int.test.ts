import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAdminFixture, type AdminFixture } from '../test/admin/harness.js';
import { freshDatabase } from '../test/kit/index.js';
import { runAdminCli } from './index.js';

const run = promisify(execFile);
const root = fileURLToPath(new URL('..', import.meta.url));

let f: AdminFixture;
const dirs: string[] = [];

beforeAll(async () => {
  f = await startAdminFixture();
});
afterAll(async () => {
  await f?.stop();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** Runs the real `spate` command (cli/spate.ts through tsx) in a child process. */
async function spate(args: string[], env: Record<string, string>) {
  try {
    const { stdout, stderr } = await run(process.execPath, ['--import', 'tsx', 'cli/spate.ts', ...args], {
      cwd: root,
      env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env },
    });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

const lastLine = (text: string) => text.trim().split('\n').at(-1)!;

/** runAdminCli in this process, with its output captured. */
async function cli(args: string[], env: Record<string, string | undefined> = { DATABASE_URL: f.databaseUrl }) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runAdminCli(args, { out: (l) => out.push(l), err: (l) => err.push(l), env });
  return { code, out: out.join('\n'), err: err.join('\n') };
}

describe('spate admin CLI', () => {
  it('cli - `spate admin user` and `spate admin key` (real processes) make a user and a scoped key that work', async () => {
    const owner = await f.newUser('cli-owner@example.com');
    const user = await spate(['admin', 'user', '--email', 'Cli.User@Example.com', '--organization', owner.organizationId, '--level', '8'], {
      DATABASE_URL: f.databaseUrl,
    });
    expect(user.code, user.stderr).toBe(0);
    const uuid = lastLine(user.stdout);
    expect(uuid).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    const { rows } = await f.db.query('select u.email, m.level from users u join organization_memberships m on m.user_id = u.id where u.uuid = $1', [uuid]);
    expect(rows).toEqual([{ email: 'Cli.User@example.com', level: 8 }]);

    const key = await spate(['admin', 'key', '--email', 'cli.user@example.com', '--scopes', 'organization:read,organization_member:read'], {
      DATABASE_URL: f.databaseUrl,
    });
    expect(key.code, key.stderr).toBe(0);
    const personalKey = lastLine(key.stdout);
    expect(personalKey).toMatch(/^phx_[0-9A-Za-z]+$/);
    const orgs = await f.api('GET', '/api/organizations/', { key: personalKey });
    expect(orgs.status).toBe(200);
    expect(orgs.body.results.map((o: { id: string; membership_level: number }) => [o.id, o.membership_level])).toEqual([[owner.organizationId, 8]]);
    expect((await f.api('POST', '/api/organizations/', { key: personalKey, body: { name: 'nope' } })).status).toBe(403);
    expect((await f.api('GET', '/api/projects/', { key: personalKey })).status).toBe(403);
  });

  it('cli - a real process exits 2 with usage on bad arguments and 1 on failures', async () => {
    const bad = await spate(['admin', 'key', '--email', 'x@example.com', '--scopes', 'organisation:read'], { DATABASE_URL: f.databaseUrl });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('unknown scope(s): organisation:read');
    const missing = await spate(['admin', 'key', '--email', 'nobody@example.com', '--scopes', '*'], { DATABASE_URL: f.databaseUrl });
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('no user with email nobody@example.com');
  });

  it('cli - user is idempotent, updates the membership level only when --level is given; the last owner is kept', async () => {
    const owner = await f.newUser('cli-owner2@example.com');
    const first = await cli(['user', '--email', 'repeat@example.com']);
    const second = await cli(['user', '--email', 'REPEAT@example.com'.replace('REPEAT', 'repeat'), '--organization', owner.organizationId]);
    expect(first.code).toBe(0);
    expect(second.code).toBe(0);
    expect(lastLine(second.out)).toBe(lastLine(first.out));
    expect(second.out).toContain('as member');
    const promoted = await cli(['user', '--email', 'repeat@example.com', '--organization', owner.organizationId, '--level', '15']);
    expect(promoted.out).toContain('updated repeat@example.com');
    expect(promoted.out).toContain('as owner');
    // Run again without --level: the membership keeps its level.
    const again = await cli(['user', '--email', 'repeat@example.com', '--organization', owner.organizationId]);
    expect(again.out).toContain('as owner');
    // Two owners: one may step down; then the other is the only owner and may not.
    expect((await cli(['user', '--email', owner.email, '--organization', owner.organizationId, '--level', '1'])).code).toBe(0);
    const refused = await cli(['user', '--email', 'repeat@example.com', '--organization', owner.organizationId, '--level', '8']);
    expect(refused.code).toBe(1);
    expect(refused.err).toContain('only owner');
  });

  it('cli - user refuses bad input', async () => {
    expect((await cli(['user'])).code).toBe(2);
    expect((await cli(['user', '--email', 'not-an-email'])).code).toBe(2);
    expect((await cli(['user', '--email', 'a@example.com', '--level', '8'])).err).toContain('--level needs --organization');
    const org = (await f.newUser('cli-owner3@example.com')).organizationId;
    expect((await cli(['user', '--email', 'a@example.com', '--organization', org, '--level', '3'])).code).toBe(2);
    expect((await cli(['user', '--email', 'a@example.com', '--organization', 'abc'])).code).toBe(2);
    const unknown = await cli(['user', '--email', 'a@example.com', '--organization', '00000000-0000-4000-8000-000000000000']);
    expect(unknown.code).toBe(1);
    expect(unknown.err).toContain('no organization');
    expect((await cli(['user', '--email', 'a@example.com', '--bogus'])).code).toBe(2);
  });

  it('cli - key with --organizations is limited to those organizations; * keys see everything', async () => {
    const owner = await f.newUser('cli-scoped@example.com');
    const second = (await f.api('POST', '/api/organizations/', { key: owner.key, body: { name: 'Second' } })).body.id as string;
    const scoped = await cli(['key', '--email', owner.email, '--scopes', '*', '--organizations', second]);
    expect(scoped.code, scoped.err).toBe(0);
    const orgs = await f.api('GET', '/api/organizations/', { key: lastLine(scoped.out) });
    expect(orgs.body.results.map((o: { id: string }) => o.id)).toEqual([second]);
    const all = await cli(['key', '--email', owner.email, '--scopes', "*"]);
    expect((await f.api('GET', '/api/organizations/', { key: lastLine(all.out) })).body.count).toBe(2);
    const { rows } = await f.db.query('select scopes from personal_api_keys where user_id = $1 order by created_at desc limit 1', [owner.id]);
    expect(rows[0].scopes).toEqual(['*']);
  });

  it('cli - key refuses bad input', async () => {
    await cli(['user', '--email', 'keyinput@example.com']);
    expect((await cli(['key', '--email', 'keyinput@example.com'])).code).toBe(2);
    expect((await cli(['key', '--email', 'keyinput@example.com', '--scopes', '*,project:read'])).code).toBe(2);
    expect((await cli(['key', '--email', 'keyinput@example.com', '--scopes', '*', '--organizations', 'x'])).code).toBe(2);
    const unknown = await cli(['key', '--email', 'keyinput@example.com', '--scopes', '*', '--organizations', '00000000-0000-4000-8000-000000000000']);
    expect(unknown.code).toBe(1);
    expect(unknown.err).toContain('no organization');
  });

  it('cli - finds the database through $SPATE_DATA_DIR/cluster.json when DATABASE_URL is not set', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'spate-cli-'));
    dirs.push(dir);
    writeFileSync(
      join(dir, 'cluster.json'),
      JSON.stringify({
        captureUrl: 'http://127.0.0.1:1',
        natsUrl: f.nats.url,
        natsUser: 'spate-operator',
        natsPassword: f.nats.auth.passwords.operator,
        databaseUrl: f.databaseUrl,
        projectId: 1,
        projectApiKey: 'phc_x',
      }),
    );
    const res = await spate(['admin', 'user', '--email', 'from-cluster-file@example.com'], { SPATE_DATA_DIR: dir });
    expect(res.code, res.stderr).toBe(0);
    const { rows } = await f.db.query('select uuid from users where email = $1', ['from-cluster-file@example.com']);
    expect(lastLine(res.stdout)).toBe(rows[0].uuid);

    const boot = await cli(['bootstrap'], { SPATE_DATA_DIR: dir });
    expect(boot.code, boot.err).toBe(0);
    const result = JSON.parse(boot.out);
    expect(result).toMatchObject({ userEmail: 'admin@spate.local' });
    expect((await f.api('GET', `/api/projects/${result.projectId}/`, { key: result.personalApiKey })).status).toBe(200);
    expect(JSON.parse((await cli(['bootstrap'], { SPATE_DATA_DIR: dir })).out)).toEqual(result);
    // cluster.json now names the bootstrap organization, project and key; the rest is kept.
    expect(JSON.parse(readFileSync(join(dir, 'cluster.json'), 'utf8'))).toEqual({
      captureUrl: 'http://127.0.0.1:1',
      natsUrl: f.nats.url,
      natsUser: 'spate-operator',
      natsPassword: f.nats.auth.passwords.operator,
      databaseUrl: f.databaseUrl,
      organizationId: result.organizationId,
      projectId: result.projectId,
      projectApiKey: result.projectApiKey,
      personalApiKey: result.personalApiKey,
    });
  });

  it('cli - `spate admin bootstrap` (real process) prints only the JSON result, also on a fresh database', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'spate-cli-boot-'));
    dirs.push(dir);
    const databaseUrl = await freshDatabase();
    const res = await spate(['admin', 'bootstrap', '--email', 'boss@example.com'], { DATABASE_URL: databaseUrl, ...f.nats.env('admin'), SPATE_DATA_DIR: dir });
    expect(res.code, res.stderr).toBe(0);
    expect(JSON.parse(res.stdout)).toMatchObject({ projectId: 1, userEmail: 'boss@example.com' });
  });

  it('cli - without DATABASE_URL or cluster.json it says what to do', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'spate-cli-empty-'));
    dirs.push(dir);
    const res = await cli(['user', '--email', 'a@example.com'], { SPATE_DATA_DIR: dir });
    expect(res.code).toBe(1);
    expect(res.err).toContain('set DATABASE_URL');
  });

  it('cli - help, unknown commands, and the spate dispatcher', async () => {
    const help = await cli(['--help']);
    expect(help.code).toBe(0);
    expect(help.out).toContain('spate admin key --email E --scopes');
    expect(help.out).toContain('DATABASE_URL');
    expect((await cli([])).code).toBe(2);
    expect((await cli(['frobnicate'])).code).toBe(2);
    const top = await spate(['admin', '--help'], {});
    expect(top.code).toBe(0);
    expect(top.stdout).toContain('spate admin user --email E');
  });
});

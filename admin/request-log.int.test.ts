// The admin server's own log output (the process as `npm start` runs it, stdout and stderr read
// as an operator would) never shows a personal API key, wherever the client put it.
import { spawn } from 'node:child_process';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { createLogger, runtimeModule } from '../lib/index.js';
import { freePort, freshDatabase, startNats, TEST_SECRET_KEY, waitFor } from '../test/kit/index.js';
import { migrate } from './db/migrate.js';
import { createPersonalApiKey } from './store/keys.js';
import { createOrganization } from './store/organizations.js';
import { ensureUser } from './store/users.js';

describe('admin request log', () => {
  it('request log - keys in the query string, the body, the path or the header never reach the log', async () => {
    await using nats = await startNats();
    const databaseUrl = await freshDatabase();
    await migrate(databaseUrl, createLogger('request-log-test', 'silent'));
    const db = new pg.Pool({ connectionString: databaseUrl, max: 1 });
    const { user } = await ensureUser(db, 'owner@request-log.example');
    await createOrganization(db, user.id, { name: 'Request log' });
    const { key } = await createPersonalApiKey(db, user.id, { scopes: ['*'], scopedOrganizations: null, label: 'test' });
    await db.end();

    const port = await freePort();
    const entry = runtimeModule(import.meta.url, './main');
    const child = spawn(process.execPath, [...entry.execArgv, entry.path], {
      env: { ...process.env, DATABASE_URL: databaseUrl, ...nats.env('admin'), SPATE_SECRET_KEY: TEST_SECRET_KEY, ADMIN_PORT: String(port), LOG_LEVEL: 'info' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    const url = `http://127.0.0.1:${port}`;
    try {
      await waitFor('admin ready', async () => (await fetch(`${url}/_ready`).catch(() => undefined))?.ok === true, 60_000);

      const wrongKey = 'phx_wrongKeyThatIsSomeonesTypo123';
      const unprefixed = 'unprefixed-secret-value-42';
      const statuses = [
        (await fetch(`${url}/api/organizations/?limit=1&personal_api_key=${key}`)).status,
        (await fetch(`${url}/api/organizations/?personal_api_key=${wrongKey}`)).status,
        (await fetch(`${url}/api/organizations/?personal%5Fapi%5Fkey=${unprefixed}&limit=2`)).status,
        (await fetch(`${url}/api/organizations/`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ name: 'Body key', personal_api_key: key }) })).status,
        (await fetch(`${url}/api/organizations/`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: `{"personal_api_key":"${key}",` })).status,
        (await fetch(`${url}/api/${key}/`)).status,
        (await fetch(`${url}/api/organizations/`, { headers: { authorization: `Bearer ${key}` } })).status,
      ];
      expect(statuses).toEqual([200, 401, 401, 201, 400, 404, 200]);
    } finally {
      child.kill('SIGTERM');
    }
    expect(await exited).toBe(0);

    // The requests were logged (so the absence below means something), with the key redacted.
    expect(output).toContain('"url":"/api/organizations/?limit=1&personal_api_key=[redacted]"');
    expect(output).toContain('"url":"/api/organizations/?personal%5Fapi%5Fkey=[redacted]&limit=2"');
    expect(output).toContain('"url":"/api/phx_[redacted]/"');
    for (const secret of [key, key.slice(4), 'phx_wrongKeyThatIsSomeonesTypo123', 'unprefixed-secret-value-42']) {
      expect(output.includes(secret), `${secret.slice(0, 8)}… is in the log`).toBe(false);
    }
  }, 90_000);
});

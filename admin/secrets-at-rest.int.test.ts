// Secrets at rest end to end (docs/security.md): what the admin server stores in PostgreSQL and in
// the KV buckets holds destination and plugin secrets only encrypted; a worker (its NATS user, its
// SPATE_SECRET_KEY) decrypts them; the API never shows them; what an older version stored in plain
// text, or an older key sealed, is sealed with the current key when the admin server starts.
import { Kvm } from '@nats-io/kv';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  BATCH_EXPORTS_BUCKET,
  createLogger,
  decryptConfigSecrets,
  generateSecretKey,
  isEncryptedSecret,
  parseSecretKey,
  PLUGIN_CONFIGS_BUCKET,
  secretContext,
  secretKeyId,
  secretKeyring,
  secretKeyringOf,
  SecretDecryptionError,
  type BatchExportRecord,
  type EncryptedSecret,
  type NatsConnection,
  type PluginConfigsRecord,
  type SecretKeyring,
} from '../lib/index.js';
import { loadWorkerConfig } from '../workers/index.js';
import { newBatchExport, newPlugin } from '../test/admin/endpoints.js';
import { startAdminFixture, type AdminFixture, type TestUser } from '../test/admin/harness.js';
import { TEST_SECRET_KEY, waitFor } from '../test/kit/index.js';
import { loadAdminConfig, startAdmin } from './index.js';

let f: AdminFixture;
let owner: TestUser;
let worker: NatsConnection;
const logger = createLogger('admin-test', 'silent');

const PG = { user: 'warehouse-user', password: 'pg-pass-3141', host: 'db.example', database: 'analytics' };
const PLUGIN_KEY = 'sk_live_plugin_2718';

beforeAll(async () => {
  f = await startAdminFixture();
  owner = await f.newUser('owner@secrets.example');
  worker = await f.nats.connect('secrets-test-worker', 'worker');
});
afterAll(async () => {
  await worker?.close();
  await f?.stop();
});

/** How a worker reads a bucket: as its own NATS user. */
async function kvAsWorker(bucket: string, key: string): Promise<{ text: string; value: unknown }> {
  const entry = await (await new Kvm(worker).open(bucket)).get(key);
  if (entry?.operation !== 'PUT') throw new Error(`${bucket} has no ${key}`);
  return { text: entry.string(), value: entry.json() };
}

/** The keyring a worker builds from its configuration. */
function workerKeyring(env: Record<string, string> = {}): SecretKeyring {
  return secretKeyringOf(loadWorkerConfig({ ...f.nats.env('worker'), SPATE_SECRET_KEY: TEST_SECRET_KEY, ...env }));
}

async function exportRow(id: string) {
  return (await f.db.query<{ team_id: number; destination_config: Record<string, unknown> }>('select team_id, destination_config from batch_exports where id = $1', [id])).rows[0]!;
}

async function pluginConfigRow(id: number) {
  return (await f.db.query<{ team_id: number; config: Record<string, unknown> }>('select team_id, config from plugin_configs where id = $1', [id])).rows[0]!;
}

async function setUpSecrets() {
  const exp = await newBatchExport(f, owner, { destination: { type: 'Postgres', config: PG } });
  const plugin = await newPlugin(f, owner, 'pipeline_destinations', {
    config_schema: [
      { key: 'url', type: 'string' },
      { key: 'api_key', type: 'string', secret: true },
    ],
  });
  const config = (await f.api('POST', `/api/projects/${owner.projectId}/plugin_configs/`, { key: owner.key, body: { plugin: plugin.id, order: 1, enabled: true, config: { url: 'https://hook.example', api_key: PLUGIN_KEY } } })).body;
  return { exportId: exp.id as string, configId: config.id as number, pluginId: plugin.id as number };
}

describe('secrets at rest', () => {
  it('secrets at rest - PostgreSQL and KV hold only ciphertext; a worker decrypts it; the API never shows it', async () => {
    const { exportId, configId } = await setUpSecrets();

    const exportStored = await exportRow(exportId);
    const configStored = await pluginConfigRow(configId);
    for (const plain of [PG.user, PG.password, PLUGIN_KEY]) {
      expect(JSON.stringify(exportStored.destination_config) + JSON.stringify(configStored.config)).not.toContain(plain);
    }
    expect(exportStored.destination_config).toMatchObject({ host: 'db.example', user: { $encrypted: expect.stringMatching(/^v1:/) }, password: { $encrypted: expect.stringMatching(/^v1:/) } });
    expect(configStored.config).toMatchObject({ url: 'https://hook.example', api_key: { $encrypted: expect.stringMatching(/^v1:/) } });

    // The KV copies, as the worker's NATS user reads them.
    let exported: { text: string; value: unknown } | undefined;
    await waitFor('export in KV', async () => (exported = await kvAsWorker(BATCH_EXPORTS_BUCKET, exportId).catch(() => undefined)) !== undefined);
    const plugins = await kvAsWorker(PLUGIN_CONFIGS_BUCKET, String(owner.projectId));
    for (const plain of [PG.user, PG.password]) expect(exported!.text).not.toContain(plain);
    expect(plugins.text).not.toContain(PLUGIN_KEY);

    // A worker's decrypt gives the plaintext back.
    const keyring = workerKeyring();
    const record = exported!.value as BatchExportRecord;
    expect(decryptConfigSecrets(record.destination.config, keyring, (k) => secretContext('batch_export', record.team_id, k))).toEqual(PG);
    const pluginRecord = (plugins.value as PluginConfigsRecord).configs.find((c) => c.id === configId)!;
    expect(decryptConfigSecrets(pluginRecord.config, keyring, (k) => secretContext('plugin_config', owner.projectId, k))).toEqual({ url: 'https://hook.example', api_key: PLUGIN_KEY });
    // Another key decrypts nothing.
    expect(() => decryptConfigSecrets(record.destination.config, secretKeyring(parseSecretKey(generateSecretKey())), (k) => secretContext('batch_export', record.team_id, k))).toThrow(SecretDecryptionError);

    // The API: neither plaintext nor ciphertext.
    const answers = [
      await f.api('GET', `/api/organizations/${owner.organizationId}/batch_exports/`, { key: owner.key }),
      await f.api('GET', `/api/organizations/${owner.organizationId}/batch_exports/${exportId}/`, { key: owner.key }),
      await f.api('GET', `/api/projects/${owner.projectId}/plugin_configs/`, { key: owner.key }),
      await f.api('GET', `/api/projects/${owner.projectId}/plugin_configs/${configId}/`, { key: owner.key }),
    ];
    for (const res of answers) {
      expect(res.status).toBe(200);
      for (const hidden of [PG.user, PG.password, PLUGIN_KEY, '$encrypted']) expect(res.text, hidden).not.toContain(hidden);
    }
  });

  it('secrets at rest - plain text left by an earlier version is encrypted when the admin server starts, in PostgreSQL and in KV', async () => {
    const { exportId, configId } = await setUpSecrets();
    // What a version before encryption stored.
    await f.db.query('update batch_exports set destination_config = $2 where id = $1', [exportId, JSON.stringify(PG)]);
    await f.db.query('update plugin_configs set config = $2 where id = $1', [configId, JSON.stringify({ url: 'https://hook.example', api_key: PLUGIN_KEY })]);

    const restarted = await startAdmin(f.config, { logger });
    try {
      const exportStored = await exportRow(exportId);
      const configStored = await pluginConfigRow(configId);
      expect(isEncryptedSecret(exportStored.destination_config.password) && isEncryptedSecret(exportStored.destination_config.user)).toBe(true);
      expect(isEncryptedSecret(configStored.config.api_key)).toBe(true);
      const keyring = workerKeyring();
      expect(decryptConfigSecrets(exportStored.destination_config, keyring, (k) => secretContext('batch_export', exportStored.team_id, k))).toEqual(PG);
      await waitFor('KV holds the sealed export', async () => !(await kvAsWorker(BATCH_EXPORTS_BUCKET, exportId)).text.includes(PG.password));
      await waitFor('KV holds the sealed plugin config', async () => !(await kvAsWorker(PLUGIN_CONFIGS_BUCKET, String(owner.projectId))).text.includes(PLUGIN_KEY));
    } finally {
      await restarted.stop();
    }
  });

  it('secrets at rest - after a key change (the old one in SPATE_SECRET_KEYS_PREVIOUS) the admin server re-encrypts every secret with the new key', async () => {
    const { exportId, configId } = await setUpSecrets();
    const newKey = generateSecretKey();
    const newKeyring = secretKeyring(parseSecretKey(newKey));
    const rotated = await startAdmin(loadAdminConfig({ ...envOf(f.config), SPATE_SECRET_KEY: newKey, SPATE_SECRET_KEYS_PREVIOUS: TEST_SECRET_KEY }), { logger });
    try {
      const exportStored = await exportRow(exportId);
      const configStored = await pluginConfigRow(configId);
      expect(secretKeyId(exportStored.destination_config.password as EncryptedSecret)).toBe(newKeyring.current.id);
      expect(secretKeyId(configStored.config.api_key as EncryptedSecret)).toBe(newKeyring.current.id);
      // A worker given only the new key reads them; one with only the old key no longer can.
      expect(decryptConfigSecrets(exportStored.destination_config, newKeyring, (k) => secretContext('batch_export', exportStored.team_id, k))).toEqual(PG);
      expect(decryptConfigSecrets(configStored.config, workerKeyring({ SPATE_SECRET_KEY: newKey }), (k) => secretContext('plugin_config', configStored.team_id, k))).toMatchObject({ api_key: PLUGIN_KEY });
      expect(() => decryptConfigSecrets(exportStored.destination_config, workerKeyring(), (k) => secretContext('batch_export', exportStored.team_id, k))).toThrow(/not configured/);
    } finally {
      await rotated.stop();
    }
    // Put every secret back under the fixture's key (the next start re-encrypts with the previous key given).
    const back = await startAdmin(loadAdminConfig({ ...envOf(f.config), SPATE_SECRET_KEY: TEST_SECRET_KEY, SPATE_SECRET_KEYS_PREVIOUS: newKey }), { logger });
    await back.stop();
    expect(secretKeyId((await exportRow(exportId)).destination_config.password as EncryptedSecret)).toBe(workerKeyring().current.id);
  });

  it('secrets at rest - a field the plugin\'s config_schema newly marks secret is encrypted in every config of the plugin, and masked', async () => {
    const plugin = await newPlugin(f, owner, 'pipeline_transformations', { config_schema: [{ key: 'token', type: 'string' }] });
    const configs = `/api/projects/${owner.projectId}/plugin_configs/`;
    const config = (await f.api('POST', configs, { key: owner.key, body: { plugin: plugin.id, order: 3, config: { token: 'was-not-secret' } } })).body;
    expect((await pluginConfigRow(config.id)).config.token).toBe('was-not-secret');
    const res = await f.api('PATCH', `/api/organizations/${owner.organizationId}/pipeline_transformations/${plugin.id}/`, {
      key: owner.key,
      body: { config_schema: [{ key: 'token', type: 'string', secret: true }] },
    });
    expect(res.status, res.text).toBe(200);
    const stored = await pluginConfigRow(config.id);
    expect(isEncryptedSecret(stored.config.token)).toBe(true);
    expect(decryptConfigSecrets(stored.config, workerKeyring(), (k) => secretContext('plugin_config', owner.projectId, k))).toEqual({ token: 'was-not-secret' });
    const shown = await f.api('GET', `${configs}${config.id}/`, { key: owner.key });
    expect(shown.text).not.toContain('was-not-secret');
    expect(shown.body.config.token).toBe('**************** POSTHOG SECRET FIELD ****************');
  });
});

/** The environment that gives back an admin configuration (the settings the tests change aside). */
function envOf(config: AdminFixture['config']): Record<string, string> {
  return {
    DATABASE_URL: config.databaseUrl,
    NATS_URL: config.natsUrl,
    NATS_USER: config.natsUser,
    NATS_PASSWORD: config.natsPassword,
    ADMIN_PORT: '0',
    LOG_LEVEL: 'silent',
  };
}

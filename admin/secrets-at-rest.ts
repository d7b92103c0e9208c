// The admin server's half of secrets at rest (lib/secrets.ts, docs/security.md): every secret it
// stores — batch export destination fields marked secret, plugin config fields the plugin's schema
// marks secret — is sealed (encrypted under the current key) before it reaches PostgreSQL, and so
// the KV buckets mirrored from it. At start it seals what an older version stored in plain text
// and re-encrypts what an older key sealed (key rotation).
import {
  decryptSecret,
  encryptSecret,
  isEncryptedSecret,
  secretContext,
  secretKeyId,
  type Logger,
  type SecretKeyring,
} from '../lib/index.js';
import { DESTINATIONS } from './batch-export-destinations.js';
import type { Queryable } from './db/pool.js';
import { secretFields } from './store/plugin-configs.js';

type Context = (field: string) => string;

/** One value as it must be stored: plain secrets encrypted, ones under an older key re-encrypted. */
function sealValue(value: unknown, secret: boolean, keyring: SecretKeyring, context: string): unknown {
  if (isEncryptedSecret(value)) {
    if (secretKeyId(value) === keyring.current.id) return value;
    return encryptSecret(decryptSecret(value, keyring, context), keyring, context);
  }
  if (!secret || value === null || value === undefined || value === '') return value;
  return encryptSecret(value, keyring, context);
}

function sealFields(config: Record<string, unknown>, isSecret: (field: string) => boolean, keyring: SecretKeyring, context: Context): Record<string, unknown> {
  return Object.fromEntries(Object.entries(config).map(([k, v]) => [k, sealValue(v, isSecret(k), keyring, context(k))]));
}

/** A batch export destination's configuration as stored: its secret fields encrypted. */
export function sealDestinationConfig(type: string, config: Record<string, unknown>, teamId: number, keyring: SecretKeyring): Record<string, unknown> {
  const fields = (DESTINATIONS as Record<string, Record<string, { secret?: boolean }>>)[type] ?? {};
  return sealFields(config, (k) => fields[k]?.secret === true, keyring, (k) => secretContext('batch_export', teamId, k));
}

/** A plugin config's values as stored: the fields its plugin's config_schema marks secret encrypted. */
export function sealPluginConfig(config: Record<string, unknown>, configSchema: unknown, teamId: number, keyring: SecretKeyring): Record<string, unknown> {
  const secrets = secretFields(configSchema);
  return sealFields(config, (k) => secrets.has(k), keyring, (k) => secretContext('plugin_config', teamId, k));
}

export interface SealResult {
  batchExports: number;
  pluginConfigs: number;
  /** Values that could not be re-encrypted (a key missing from the keyring): left as they are. */
  failed: number;
}

/**
 * Seals every stored secret that is not sealed under the current key: plain text left by a
 * version before encryption, a field a plugin's schema newly marks secret, a value an older key
 * sealed. `pluginId` limits it to that plugin's configs (after its config_schema changed). A row
 * changed meanwhile by a request is left alone (compare-and-set): that request sealed it.
 */
export async function sealStoredSecrets(db: Queryable, keyring: SecretKeyring, log: Logger, scope: { pluginId?: number } = {}): Promise<SealResult> {
  const result: SealResult = { batchExports: 0, pluginConfigs: 0, failed: 0 };
  const attempt = <T>(what: Record<string, unknown>, seal: () => T): T | undefined => {
    try {
      return seal();
    } catch (err) {
      result.failed++;
      log.error({ ...what, err: (err as Error).message }, 'a stored secret could not be re-encrypted (is its key in SPATE_SECRET_KEYS_PREVIOUS?)');
      return undefined;
    }
  };

  if (scope.pluginId === undefined) {
    const exports = await db.query<{ id: string; team_id: number; destination_type: string; destination_config: Record<string, unknown> }>(
      'select id, team_id, destination_type, destination_config from batch_exports',
    );
    for (const row of exports.rows) {
      const sealed = attempt({ batchExport: row.id }, () => sealDestinationConfig(row.destination_type, row.destination_config, row.team_id, keyring));
      if (!sealed || JSON.stringify(sealed) === JSON.stringify(row.destination_config)) continue;
      const updated = await db.query('update batch_exports set destination_config = $2 where id = $1 and destination_config = $3::jsonb', [
        row.id,
        JSON.stringify(sealed),
        JSON.stringify(row.destination_config),
      ]);
      result.batchExports += updated.rowCount ?? 0;
    }
  }

  const configs = await db.query<{ id: number; team_id: number; config: Record<string, unknown>; config_schema: unknown }>(
    `select c.id, c.team_id, c.config, p.config_schema from plugin_configs c join plugins p on p.id = c.plugin_id
     ${scope.pluginId === undefined ? '' : 'where c.plugin_id = $1'}`,
    scope.pluginId === undefined ? [] : [scope.pluginId],
  );
  for (const row of configs.rows) {
    const sealed = attempt({ pluginConfig: row.id }, () => sealPluginConfig(row.config, row.config_schema, row.team_id, keyring));
    if (!sealed || JSON.stringify(sealed) === JSON.stringify(row.config)) continue;
    const updated = await db.query('update plugin_configs set config = $2 where id = $1 and config = $3::jsonb', [row.id, JSON.stringify(sealed), JSON.stringify(row.config)]);
    result.pluginConfigs += updated.rowCount ?? 0;
  }
  return result;
}

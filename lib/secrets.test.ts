import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from './config.js';
import {
  decryptConfigSecrets,
  decryptSecret,
  encryptSecret,
  generateSecretKey,
  isEncryptedSecret,
  parseSecretKey,
  secretContext,
  secretKeyId,
  secretKeyring,
  secretKeySettings,
  SecretDecryptionError,
} from './secrets.js';

const keyring = secretKeyring(randomBytes(32));
const ctx = secretContext('batch_export', 7, 'password');

function failure(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    if (err instanceof SecretDecryptionError) return err.code;
    throw err;
  }
  return 'decrypted';
}

describe('secrets', () => {
  it('secrets - a value round-trips through the v1 format, which shows no plaintext and never repeats', () => {
    const a = encryptSecret('hunter2-very-secret', keyring, ctx);
    const b = encryptSecret('hunter2-very-secret', keyring, ctx);
    expect(a.$encrypted).toMatch(new RegExp(`^v1:${keyring.current.id}:[A-Za-z0-9_-]{16}:[A-Za-z0-9_-]+$`));
    expect(a.$encrypted).not.toContain('hunter2');
    expect(Buffer.from(a.$encrypted.split(':')[3]!, 'base64url').toString('latin1')).not.toContain('hunter2');
    expect(a.$encrypted).not.toBe(b.$encrypted);
    expect(isEncryptedSecret(a)).toBe(true);
    expect(decryptSecret(a, keyring, ctx)).toBe('hunter2-very-secret');
    expect(decryptSecret(encryptSecret({ nested: [1, 'x'] }, keyring, ctx), keyring, ctx)).toEqual({ nested: [1, 'x'] });
    expect(secretKeyId(a)).toBe(keyring.current.id);
  });

  it('secrets - a ciphertext moved to another project or field, or changed, does not decrypt', () => {
    const sealed = encryptSecret('token', keyring, ctx);
    expect(failure(() => decryptSecret(sealed, keyring, secretContext('batch_export', 8, 'password')))).toBe('not_authentic');
    expect(failure(() => decryptSecret(sealed, keyring, secretContext('batch_export', 7, 'user')))).toBe('not_authentic');
    expect(failure(() => decryptSecret(sealed, keyring, secretContext('plugin_config', 7, 'password')))).toBe('not_authentic');
    const parts = sealed.$encrypted.split(':');
    const bytes = Buffer.from(parts[3]!, 'base64url');
    bytes[0] = bytes[0]! ^ 1;
    const tampered = { $encrypted: [...parts.slice(0, 3), bytes.toString('base64url')].join(':') };
    expect(failure(() => decryptSecret(tampered, keyring, ctx))).toBe('not_authentic');
    expect(failure(() => decryptSecret({ $encrypted: 'v2:abc:def:ghi' }, keyring, ctx))).toBe('malformed');
    expect(failure(() => decryptSecret({ $encrypted: 'plain text' }, keyring, ctx))).toBe('malformed');
  });

  it('secrets - after a rotation the previous key still decrypts, a key not configured is named', () => {
    const old = randomBytes(32);
    const sealedWithOld = encryptSecret('s3cr3t', secretKeyring(old), ctx);
    const rotated = secretKeyring(randomBytes(32), [old]);
    expect(rotated.current.id).not.toBe(secretKeyId(sealedWithOld));
    expect(decryptSecret(sealedWithOld, rotated, ctx)).toBe('s3cr3t');
    expect(secretKeyId(encryptSecret('new', rotated, ctx))).toBe(rotated.current.id);
    expect(failure(() => decryptSecret(sealedWithOld, secretKeyring(randomBytes(32)), ctx))).toBe('unknown_key');
  });

  it('secrets - decryptConfigSecrets decrypts the encrypted fields of a config and keeps the others', () => {
    const config = { host: 'db.example.com', password: encryptSecret('pw', keyring, secretContext('batch_export', 3, 'password')), port: 5432 };
    expect(decryptConfigSecrets(config, keyring, (field) => secretContext('batch_export', 3, field))).toEqual({ host: 'db.example.com', password: 'pw', port: 5432 });
    expect(isEncryptedSecret({ $encrypted: 'x', other: 1 })).toBe(false);
    expect(isEncryptedSecret('v1:a:b:c')).toBe(false);
  });

  it('secrets - SPATE_SECRET_KEY is required and must be 32 bytes of base64; generated keys are', () => {
    const settings = secretKeySettings();
    const missing = (() => {
      try {
        loadConfig(settings, {});
        return undefined;
      } catch (err) {
        return err;
      }
    })();
    expect(missing).toBeInstanceOf(ConfigError);
    expect((missing as ConfigError).message).toContain('SPATE_SECRET_KEY: required: 32 random bytes in base64');
    expect(() => loadConfig(settings, { SPATE_SECRET_KEY: Buffer.alloc(16).toString('base64') })).toThrow(/16 bytes; it must be 32/);
    expect(() => loadConfig(settings, { SPATE_SECRET_KEY: 'not a key!' })).toThrow(/not base64/);
    const key = generateSecretKey();
    expect(parseSecretKey(key)).toHaveLength(32);
    const loaded = loadConfig(settings, { SPATE_SECRET_KEY: key, SPATE_SECRET_KEYS_PREVIOUS: `${generateSecretKey()}, ${generateSecretKey()}` });
    expect(loaded.previousSecretKeys).toHaveLength(2);
    expect(() => loadConfig(settings, { SPATE_SECRET_KEY: key, SPATE_SECRET_KEYS_PREVIOUS: 'short' })).toThrow(/a previous key is/);
  });
});
